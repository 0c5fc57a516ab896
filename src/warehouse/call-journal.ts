/**
 * The journal of one piece of work's billed calls (one activity's work: a target's listing and
 * enrichment from a given page, or the enrichment of a job's landed pages). Before a call, its
 * worst case is appended as an intent; once its answer is landed, what it was charged. A worker
 * killed at any moment therefore leaves a journal that says what the work spent: settled calls at
 * their charge, and calls that were in flight (perhaps charged, never landed) at their worst case.
 * A retried activity replays it, so it never spends beyond the work's grant, and the workflow
 * settles a failed activity's grant from it.
 *
 * Lines are appended with one write each and not fsynced: a killed process loses nothing the
 * kernel has accepted, and a machine crash loses the landings' parent directory entries first.
 */
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, writeFileSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pathSegment } from './landing.js';

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
type JournalLine =
  | { intent: string; worst: number }
  | { settled: string; credits: number }
  | { lost: string; credits: number }
  | { cancelled: string }
  | ({ failed: string } & CallFailure);

/** A call that failed for good (an error answer, a refused answer): what it was, why, and the API's request id. */
export interface CallFailure {
  endpoint: string;
  /** The item or account the call was about. */
  subject: string;
  reason: string;
  request_id?: string;
  at: string;
}

export function journalFile(dataDir: string, runId: string, workId: string): string {
  return join(dataDir, 'journal', pathSegment(runId), `${pathSegment(workId)}.ndjson`);
}

/**
 * The calls of a run that failed for good and were landed by none of its works since, from every
 * journal of the run, by landing key.
 */
export function runFailures(dataDir: string, runId: string): Map<string, CallFailure> {
  const folder = dirname(journalFile(dataDir, runId, 'any'));
  const failures = new Map<string, CallFailure>();
  const landed = new Set<string>();
  if (!existsSync(folder)) return failures;
  for (const name of readdirSync(folder)) {
    if (!name.endsWith('.ndjson')) continue;
    const journal = CallJournal.loadFile(join(folder, name));
    for (const [key, failure] of journal.failures()) failures.set(key, failure);
    for (const key of journal.settledKeys) landed.add(key);
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
  private fd: number | undefined;
  private attempt: number | undefined;

  private constructor(private readonly file: string) {}

  /** The journal of a piece of work, replayed from disk when an earlier attempt wrote one. */
  static load(dataDir: string, runId: string, workId: string): CallJournal {
    return CallJournal.loadFile(journalFile(dataDir, runId, workId));
  }

  static loadFile(file: string): CallJournal {
    const journal = new CallJournal(file);
    if (existsSync(journal.file)) {
      for (const text of readFileSync(journal.file, 'utf8').split('\n')) {
        // A line cut short by a kill is the last one, and only ever an intent whose call never
        // started: skipping it is exact.
        if (text === '') continue;
        let line: JournalLine;
        try {
          line = JSON.parse(text) as JournalLine;
        } catch {
          continue;
        }
        journal.apply(line);
      }
    }
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
  claim(attempt: number): void {
    this.attempt = attempt;
    mkdirSync(dirname(this.file), { recursive: true });
    writeFileSync(`${this.file}.owner`, String(attempt));
  }

  intend(key: string, worst: number): void {
    if (this.attempt !== undefined && readFileSync(`${this.file}.owner`, 'utf8') !== String(this.attempt)) {
      throw new Error(`attempt ${this.attempt} of this work was superseded by a later one: it makes no more calls`);
    }
    this.append({ intent: key, worst });
  }

  settle(key: string, credits: number): void {
    this.append({ settled: key, credits });
  }

  /** Counts a call whose landing was found as settled at its charge, in this reading only: nothing is written. */
  countAsSettled(key: string, credits: number): void {
    this.apply({ settled: key, credits });
  }

  /** Settles an attempt whose answer was lost, at the charge of the attempt at the same key that answered. */
  settleLost(key: string, credits: number): void {
    this.append({ lost: key, credits });
  }

  /** Intents begun and not settled at this key: one per attempt of its call in flight or lost. */
  openAttempts(key: string): number {
    return this.open.get(key)?.length ?? 0;
  }

  /** Records why a call failed for good, so `show` can tell it and a retry can make it again. */
  fail(key: string, failure: CallFailure): void {
    this.append({ failed: key, ...failure });
  }

  /** The calls that failed for good and were not landed since, by landing key. */
  failures(): ReadonlyMap<string, CallFailure> {
    return this.failedKeys;
  }

  /** Drops an intent whose call was refused before the API could charge it (nothing was sent, or a 4xx). */
  cancel(key: string): void {
    this.append({ cancelled: key });
  }

  /**
   * What the work has committed: settled charges, plus the worst case of every call begun and not
   * settled (in flight now, or lost by an earlier attempt). Held against the work's grant.
   */
  committed(): number {
    return this.settledCredits + this.openCredits;
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

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
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
    if ('cancelled' in line) {
      this.openCredits -= this.open.get(line.cancelled)?.shift() ?? 0;
      return;
    }
    if ('lost' in line) {
      this.openCredits -= this.open.get(line.lost)?.shift() ?? 0;
      this.settledCredits += line.credits;
      this.lostSettledCalls++;
      this.lostSettledCredits += line.credits;
      return;
    }
    this.openCredits -= this.open.get(line.settled)?.shift() ?? 0;
    this.failedKeys.delete(line.settled);
    this.settledCredits += line.credits;
    this.settledCalls++;
    this.settledKeys.add(line.settled);
  }

  private append(line: JournalLine): void {
    if (this.fd === undefined) {
      mkdirSync(dirname(this.file), { recursive: true });
      this.fd = openSync(this.file, 'a');
    }
    writeSync(this.fd, `${JSON.stringify(line)}\n`);
    this.apply(line);
  }
}
