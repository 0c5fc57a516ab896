/**
 * The journal of one piece of work's billed calls (one activity's work: a target's listing and
 * enrichment from a given page, or the enrichment of a job's landed pages). Before a call, its
 * worst case is appended as an intent; once its answer is landed, what it was charged. A worker
 * killed at any moment therefore leaves a journal that says what the work spent: settled calls at
 * their charge, and calls that were in flight (perhaps charged, never landed) at their worst case.
 * A retried activity replays it, so it never spends beyond the work's grant, and the workflow
 * settles a failed activity's grant from it.
 *
 * Where the records live is a JournalLog: a file in the data directory (FileJournalLog, file-journal.ts), or
 * a table of the shared PostgreSQL catalog (src/store/shared), which a retry on another machine
 * replays the same way. Each record is appended, and awaited, before what it records goes on: an
 * intent before its call is sent.
 *
 * The file's format: each record is one line, `<JSON>\t<CRC-32 of the JSON, 8 hex digits>\n`,
 * written whole (short writes continued) before `append` returns; a record that cannot be written
 * throws, and the work stops. A reader therefore tells a whole record from a cut one, and skips only
 * cut ones, which is exact:
 * - a cut intent is one whose append threw, so its call was never sent (the intent is appended
 *   before the call starts);
 * - a cut settlement (`settled`, `lost`, `cancelled`) leaves its intent open, counted at its worst
 *   case: never less than what was charged, so the work's grant is never overspent;
 * - a cut `failed` record leaves the call out of the run's failures (so `retry` does not make it
 *   again); its charge was cancelled or settled by a record of its own, before it.
 * Lines without a checksum are the records of earlier versions (plain JSON lines) and are read when
 * they parse as a JSON object, so their journals still load; a line with a checksum is read only
 * when the checksum matches. (So a record cut exactly before its tab, a whole JSON object, is read:
 * its content is whole, and were it an intent whose append failed just there, its call, never
 * sent, is counted at its worst case, on the safe side.) A failed append may leave part of a record
 * in the file: the next record this journal appends starts with a newline (as does the first one
 * appended to a file that does not end with one), so it never glues to the cut one; and should a
 * record be glued after a cut one all the same (another writer's failed append), the reader finds
 * it by its checksum. The file is never truncated: an earlier attempt may still be appending to it.
 *
 * Records are not fsynced one by one (an fsync costs milliseconds, a call's record microseconds): a
 * killed process loses nothing the kernel has accepted, so a kill cuts at most the record being
 * written. A machine crash may lose the records appended since the last `sync`, which fsyncs the
 * journal and is called before the work's position is checkpointed (one fsync for all the records
 * the checkpoint covers), so no checkpoint outlives the records it relies on.
 */
import type { RunBudgets } from './budget-ledger.js';
import type { CallFailure } from '../harvest/progress.js';

export interface JournalTotals {
  /** Settled charges plus the worst case of calls that were in flight when an attempt died. */
  credits: number;
  settledCalls: number;
  /** Calls begun by an earlier attempt and never landed: maybe charged, so counted at their worst. */
  lostCalls: number;
  lostCredits: number;
}

/**
 * `lost` settles an attempt whose answer never arrived (a cut body, a timeout) and that the client
 * made again: the API charged it as it charged the attempt that answered, so it is counted at that
 * charge, as a lost call, and not as the key's landing.
 */
export type JournalLine =
  | { intent: string; worst: number }
  | { settled: string; credits: number }
  | { lost: string; credits: number }
  | { cancelled: string }
  | ({ failed: string } & CallFailure);

/**
 * A work's attempt that lost its journal's claim: a later attempt claimed it, or its run is over
 * and its journals were removed. It makes no further billed call.
 */
export class SupersededAttemptError extends Error {
  override readonly name = 'SupersededAttemptError';
}

/**
 * A record for a run whose journals were removed (its run over and archived in the lake): nothing
 * is appended there any more. A late record goes to the run's late records (JournalStore.lateLog).
 */
export class RunJournalsEndedError extends Error {
  override readonly name = 'RunJournalsEndedError';
}

/** Where one journal's records live, in the order they were appended. */
export interface JournalLog {
  /** The piece of work whose journal this is. */
  readonly work: string;
  /** Every whole record, in order. */
  records(): Promise<JournalLine[]>;
  /**
   * Makes `attempt` the journal's only writer (see CallJournal.claim); throws a
   * SupersededAttemptError when a later attempt holds the claim, or the run's journals were
   * removed (a stale task of an ended run), claiming nothing.
   */
  claim(attempt: number): Promise<void>;
  /** The attempt that claimed the journal last, if any; none once the run's journals were removed. */
  owner(): Promise<number | undefined>;
  /**
   * Appends a record whole, or throws naming where: a RunJournalsEndedError once the run's journals
   * were removed, a SupersededAttemptError when the attempt that claimed the journal through this
   * log no longer holds the claim.
   */
  append(line: JournalLine): Promise<void>;
  /** Makes the records appended so far outlive a machine crash. */
  sync(): Promise<void>;
  close(): Promise<void>;
}

/** Where a run's journals live: a journal per piece of work. */
export interface JournalStore {
  journalLog(runId: string, workId: string): JournalLog;
  /** The logs of every journal of a run. */
  runJournalLogs(runId: string): Promise<JournalLog[]>;
  /**
   * Removes the journals of runs that are over for good, their claims and their archiving marks:
   * once the lake keeps their records (src/warehouse/journal-archive.ts), or by the daily
   * maintenance. What stays is that the run ended: no attempt claims, and no record is appended to,
   * a journal of it after (a frozen worker's stale task).
   */
  removeRunJournals(runIds: readonly string[]): Promise<void>;
  /**
   * Where the records of an ended run's work go once its journal was removed: what a woken attempt
   * learns of its calls that were on the wire (charged, or never sent). The next load archives them
   * with the run's journal and corrects the run's figures (src/warehouse/journal-archive.ts).
   */
  lateLog(runId: string, workId: string): JournalLog;
  /** The late records waiting for a load: each work's log, by run. */
  lateLogs(): Promise<LateLogs[]>;
  /** Removes late records a load archived, by run (each run's records read before, in `lateLogs`). */
  removeLateLogs(runIds: readonly string[]): Promise<void>;
  /**
   * Marks, durably, that these runs' journals are being copied into the lake: a load that finds a
   * mark replaces what an earlier copy may have committed before it could remove the journals.
   */
  markArchiving(runIds: readonly string[]): Promise<void>;
  /** Which of these runs carry an archiving mark. */
  archivingMarked(runIds: readonly string[]): Promise<Set<string>>;
}

/** A run's late records waiting for a load: a log per work. */
export interface LateLogs {
  runId: string;
  logs: JournalLog[];
}

/**
 * The calls of a run that failed for good and were landed by none of its works since, from every
 * journal of the run, by landing key.
 */
export async function runFailures(journals: JournalStore, runId: string): Promise<Map<string, CallFailure>> {
  const failures = new Map<string, CallFailure>();
  const landed = new Set<string>();
  for (const log of await journals.runJournalLogs(runId)) {
    const journal = await CallJournal.replay(log);
    for (const [key, failure] of journal.failures()) failures.set(key, failure);
    for (const key of journal.settledKeys) landed.add(key);
    await log.close();
  }
  for (const key of landed) failures.delete(key);
  return failures;
}

export class CallJournal {
  /** Worst cases of intents not yet matched by a settlement, per landing key (a key may be retried). */
  private readonly open = new Map<string, number[]>();
  readonly settledKeys = new Set<string>();
  /** Calls that failed for good and were not landed since, by landing key. */
  private readonly failedKeys = new Map<string, CallFailure>();
  private settledCredits = 0;
  private settledCalls = 0;
  private openCredits = 0;
  /** Attempts whose answers were lost and that were settled at the charge of the attempt that answered. */
  private lostSettledCalls = 0;
  private lostSettledCredits = 0;
  private attempt: number | undefined;
  /** Aborted when Temporal has given this attempt up (its heartbeat refused): its fence is shut. */
  private signal: AbortSignal | undefined;
  private lateRecords: JournalLog | undefined;
  /**
   * The budgets across runs this work's calls are reserved against, set by its work frame
   * (activities/metered-call.ts) when a budget covers the run: each call reserves its worst case
   * there right after its fence, on the same path as its intent here.
   */
  budgets: RunBudgets | undefined;

  private constructor(
    private readonly log: JournalLog,
    /** Where records go once the run's journals were removed (JournalStore.lateLog); none when only read. */
    private readonly late?: () => JournalLog,
  ) {}

  /** The journal of a piece of work, replayed from its log when an earlier attempt wrote one. */
  static async load(journals: JournalStore, runId: string, workId: string): Promise<CallJournal> {
    return CallJournal.replay(journals.journalLog(runId, workId), () => journals.lateLog(runId, workId));
  }

  static async replay(log: JournalLog, late?: () => JournalLog): Promise<CallJournal> {
    const journal = new CallJournal(log, late);
    for (const line of await log.records()) journal.apply(line);
    return journal;
  }

  /** Whether this work already landed and settled the call at this landing key. */
  isSettled(key: string): boolean {
    return this.settledKeys.has(key);
  }

  /** Whether this work began a call at this key that it has not settled: the landing, if any, is its own. */
  hasOpenIntent(key: string): boolean {
    return (this.open.get(key)?.length ?? 0) > 0;
  }

  /** Keys of calls begun and not settled. */
  openKeys(): string[] {
    return [...this.open].filter(([, worsts]) => worsts.length > 0).map(([key]) => key);
  }

  /**
   * Makes this activity attempt the journal's only writer: an earlier attempt that Temporal gave up
   * but that is still running (its worker cut off from Temporal) finds the claim gone at its next
   * call and stops, instead of buying alongside the new attempt.
   */
  async claim(attempt: number, signal?: AbortSignal): Promise<void> {
    this.attempt = attempt;
    this.signal = signal;
    await this.log.claim(attempt);
  }

  /**
   * The fence, checked right before each billed request goes on the wire (the client's
   * `beforeSend`, after its rate gate, backoff and any freeze of the process): throws a
   * SupersededAttemptError unless this attempt still holds the journal's claim and Temporal has not
   * given it up. One read of the claim (a small file, or one indexed row in the shared catalog).
   */
  async fence(): Promise<void> {
    if (this.attempt === undefined) return;
    if (this.signal?.aborted) throw new SupersededAttemptError(`attempt ${this.attempt} of work ${this.log.work} was given up by Temporal: it makes no more calls`);
    const owner = await this.log.owner();
    if (owner !== this.attempt) {
      throw new SupersededAttemptError(
        owner === undefined
          ? `attempt ${this.attempt} of work ${this.log.work} belongs to a run that is over (its journals were removed): it makes no more calls`
          : `attempt ${this.attempt} of work ${this.log.work} was superseded by attempt ${owner}: it makes no more calls`,
      );
    }
  }

  async intend(key: string, worst: number): Promise<void> {
    // Counted at once, before anything is awaited: the caller has just released the hold this
    // intent takes over, and another call that checks the grant meanwhile (while the claim is read
    // and the record written, a round trip to a shared catalog) must find it committed. Withdrawn
    // if the record cannot be written, since then the call is not sent.
    // The claim is not read here: the fence is read right before the call goes on the wire
    // (`fence`, through the client's `beforeSend`), after whatever waiting comes between. An intent a
    // superseded attempt journals there is cancelled when its fence refuses the call.
    const line = { intent: key, worst };
    this.apply(line);
    try {
      await this.log.append(line);
    } catch (error) {
      const worsts = this.open.get(key);
      const at = worsts?.lastIndexOf(worst) ?? -1;
      if (worsts && at >= 0) {
        worsts.splice(at, 1);
        this.openCredits -= worst;
      }
      throw error;
    }
  }

  async settle(key: string, credits: number): Promise<void> {
    await this.append({ settled: key, credits });
  }

  /** Counts a call whose landing was found as settled at its charge, in this reading only: nothing is written. */
  countAsSettled(key: string, credits: number): void {
    this.apply({ settled: key, credits });
  }

  /** Settles an attempt whose answer was lost, at the charge of the attempt at the same key that answered. */
  async settleLost(key: string, credits: number): Promise<void> {
    await this.append({ lost: key, credits });
  }

  /** Intents begun and not settled at this key: one per attempt of its call in flight or lost. */
  openAttempts(key: string): number {
    return this.open.get(key)?.length ?? 0;
  }

  /** Records why a call failed for good, so `show` can tell it and a retry can make it again. */
  async fail(key: string, failure: CallFailure): Promise<void> {
    await this.append({ failed: key, ...failure });
  }

  /** The calls that failed for good and were not landed since, by landing key. */
  failures(): ReadonlyMap<string, CallFailure> {
    return this.failedKeys;
  }

  /** Drops an intent whose call was refused before the API could charge it (nothing was sent, or a 4xx). */
  async cancel(key: string): Promise<void> {
    await this.append({ cancelled: key });
  }

  /**
   * What the work has committed: settled charges, plus the worst case of every call begun and not
   * settled (in flight now, or lost by an earlier attempt). Held against the work's grant.
   */
  committed(): number {
    return this.settledCredits + this.openCredits;
  }

  /** What the API charged the work's calls so far: settled charges only (what its heartbeats show live). */
  charged(): number {
    return this.settledCredits;
  }

  /**
   * The journal's account; called between calls, when the open intents are the lost ones. Lost
   * calls are those open intents plus the attempts settled as lost.
   */
  totals(): JournalTotals {
    let lostCalls = this.lostSettledCalls;
    for (const worsts of this.open.values()) lostCalls += worsts.length;
    return { credits: this.committed(), settledCalls: this.settledCalls, lostCalls, lostCredits: this.openCredits + this.lostSettledCredits };
  }

  /**
   * Makes the records appended so far outlive a machine crash; called before the work's position is
   * checkpointed (once for all the records the checkpoint covers).
   */
  async sync(): Promise<void> {
    await this.log.sync();
  }

  async close(): Promise<void> {
    await this.log.close();
    await this.lateRecords?.close();
  }

  private apply(line: JournalLine): void {
    if ('failed' in line) {
      const { failed, ...failure } = line;
      this.failedKeys.set(failed, failure);
      return;
    }
    if ('intent' in line) {
      const worsts = this.open.get(line.intent) ?? [];
      worsts.push(line.worst);
      this.open.set(line.intent, worsts);
      this.openCredits += line.worst;
      return;
    }
    // Each record closes the key's latest open intent: a call's attempts are journaled in order, and
    // the one that answered (or was refused, or landed before its worker died) is the last of them.
    // The earlier ones are attempts whose answers were lost, each at its own worst case (an attempt
    // of a retried activity may have asked for a different limit).
    if ('cancelled' in line) {
      this.openCredits -= this.open.get(line.cancelled)?.pop() ?? 0;
      return;
    }
    if ('lost' in line) {
      this.openCredits -= this.open.get(line.lost)?.pop() ?? 0;
      this.settledCredits += line.credits;
      this.lostSettledCalls++;
      this.lostSettledCredits += line.credits;
      return;
    }
    const intent = this.open.get(line.settled)?.pop();
    // The same call settled twice: a later attempt found its landing and settled it, then the
    // earlier attempt (frozen, cut off from Temporal, and running again) settled its own answer at
    // the same key. One charge: the second settlement closes no intent and counts nothing.
    if (intent === undefined && this.settledKeys.has(line.settled)) return;
    this.openCredits -= intent ?? 0;
    this.failedKeys.delete(line.settled);
    this.settledCredits += line.credits;
    this.settledCalls++;
    this.settledKeys.add(line.settled);
  }

  /**
   * The record counts only once its log has it whole. A record of an attempt that lost its claim
   * (woken after a later attempt took its work over, or after its run ended, settling a call that
   * was on the wire) goes to the run's late records: the attempt that took over may already have
   * read the journal for the run's figures. The load that archives the run's journals, or the next,
   * adds them to the run's figures.
   */
  private async append(line: JournalLine): Promise<void> {
    try {
      await this.log.append(line);
    } catch (error) {
      if (!(error instanceof RunJournalsEndedError || error instanceof SupersededAttemptError) || !this.late) throw error;
      this.lateRecords ??= this.late();
      await this.lateRecords.append(line);
    }
    this.apply(line);
  }
}
