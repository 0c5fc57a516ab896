/**
 * A shared store's answers, in segments in the object store: answers that arrive together, from any
 * work of a run in this process, are uploaded together as one segment object
 * (`segments/<run>/<writer>-NNNNNN.seg`, the format of segment.ts), so a run makes one PUT per group
 * of answers, not one per answer.
 *
 * A call settled before the object holding its answer is uploaded settles with its answer: the
 * journal's record and the answer's frame go into the catalog in one statement
 * (SettledWithAnswer, PostgresJournalLog.appendWithAnswer), and the frame is forgotten there once
 * the upload is done. So a worker that dies before an upload loses no answer it settled: every
 * reader finds the waiting answers in the catalog (staged as a segment of the scratch directory
 * named after them, stageWaiting), and only the calls truly in flight, not yet settled, are bought
 * again by the retry. A load meeting an answer twice (in the catalog, and in the object uploaded
 * meanwhile) loads it once: the extract stage reads each key of a run once.
 *
 * A work's answers are uploaded as a group commit: when the work checkpoints (its journal's sync,
 * at most once a second while pages come, and before it returns), when a group is full, or
 * GROUP_WAIT_MS after it began; one upload at a time per run, answers arriving while one is under
 * way forming the next group. Answers landed outside a work (a run's status, a job's results) are
 * uploaded at once, and their landing resolves after. Each uploaded segment is also written to the
 * worker's scratch directory, where AnswerSegments reads it back by key; the segments other workers
 * uploaded are fetched there (staged) when a key is not found, or by the loader before a load. A
 * staged copy is a cache: written without fsync, and fetched again when its size is not the object's.
 */
import { createHash } from 'node:crypto';
import { mkdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { newSegmentFileName } from '../answer-segments.js';
import { temporaryFor } from '../durable-file.js';
import { landingKey, landingText, type Landing } from '../landing.js';
import { fileOfObjectKey, isSegmentObjectKey, objectKey, objectPrefix, runFolderOfKey, runSegmentFile, runSegmentFolder, segmentFileName, segmentRoot } from '../layout.js';
import { DEFAULT_OUTAGE_WAIT_MS, waitOutOutages } from '../outage.js';
import { frameOf, segmentHeaderText } from '../segment.js';
import type { JournalLine, JournalLog } from '../call-journal.js';
import type { ObjectStorage } from './object-storage.js';
import type { PostgresCatalog, PostgresJournalLog, WaitingAnswer } from './postgres-catalog.js';

/** A group waits at most this long for its upload (a work's checkpoint uploads it sooner): an answer is never held for long. */
const GROUP_WAIT_MS = 1_000;
/**
 * A group this full is uploaded at once: enough answers for one PUT per 20 of them or fewer, few
 * enough that the catalog holds few answers waiting for their upload at any time.
 */
const GROUP_MAX_FRAMES = 32;
const GROUP_MAX_BYTES = 8 << 20;
/** A run's segments in the object store are listed again, when a key is missed, at most this often. */
const RELIST_EVERY_MS = 1_000;

interface WaitingLanding {
  frame: Buffer;
  key: string;
}

/** An answer this process landed and has not uploaded yet. */
interface PendingLanding {
  landing: Landing;
  frame: Buffer;
  uploaded: Promise<void>;
  /** Its settlements kept in the catalog with it, each resolving with the row's number. */
  kept: Promise<number>[];
}

/** A promise and what settles it: one per group, resolved once its segment object is uploaded. */
interface Upload {
  done: Promise<void>;
  resolve: () => void;
  reject: (error: unknown) => void;
}

function newUpload(): Upload {
  let resolve!: () => void;
  let reject!: (error: unknown) => void;
  const done = new Promise<void>((ok, fail) => {
    resolve = ok;
    reject = fail;
  });
  // Awaited by whoever lands or settles in the group; a failure no one awaits is not an unhandled rejection.
  done.catch(() => undefined);
  return { done, resolve, reject };
}

/** A run's answers waiting for their upload, and the upload under way. */
interface RunGroup {
  runId: string;
  waiting: WaitingLanding[];
  bytes: number;
  /** Settled when the waiting answers are uploaded. */
  next: Upload;
  /** The upload under way, if any. */
  flying: Promise<void> | undefined;
  /** Another upload was asked for while one was under way. */
  again: boolean;
  timer: NodeJS.Timeout | undefined;
}

/** A run's segment objects as last listed: when the listing began, and its end. */
interface RunListing {
  startedAt: number;
  done: Promise<void>;
}

export class SharedSegments {
  private readonly groups = new Map<string, RunGroup>();
  private readonly listings = new Map<string, RunListing>();
  /** Answers landed by this process and not yet uploaded, by key: found here meanwhile. */
  private readonly pending = new Map<string, PendingLanding>();

  constructor(
    private readonly objects: ObjectStorage,
    private readonly catalog: PostgresCatalog,
    private readonly dataDir: string,
    /** How long an upload, and the forgetting of its answers in the catalog, wait out an outage (HARVESTER_OUTAGE_WAIT_SECONDS). */
    private readonly outageWaitMs = DEFAULT_OUTAGE_WAIT_MS,
  ) {}

  /**
   * Lands an answer. Resolves with its key once the segment object holding it is uploaded; with
   * `untilSync`, at once, the upload following at the next flush (the work's checkpoint), when the
   * group is full, or GROUP_WAIT_MS later.
   */
  async land(landing: Landing, untilSync = false): Promise<string> {
    const key = landingKey(landing);
    const runFolder = runFolderOfKey(key);
    let group = this.groups.get(runFolder);
    if (!group) {
      group = { runId: landing.run_id, waiting: [], bytes: 0, next: newUpload(), flying: undefined, again: false, timer: undefined };
      this.groups.set(runFolder, group);
    }
    const frame = frameOf(key, landingText(landing));
    group.waiting.push({ frame, key });
    group.bytes += frame.length;
    const uploaded = group.next.done;
    this.pending.set(key, { landing, frame, uploaded, kept: [] });
    if (!untilSync || group.waiting.length >= GROUP_MAX_FRAMES || group.bytes >= GROUP_MAX_BYTES) this.upload(runFolder, group);
    else group.timer ??= setTimeout(() => this.upload(runFolder, group), GROUP_WAIT_MS);
    if (!untilSync) await uploaded;
    return key;
  }

  /**
   * Lands what no settlement carries (a media file) with the run's answers, and keeps it in the
   * catalog until its group is uploaded: it is readable at once from any machine, and outlives
   * this process, before the answer that names it lands; the upload stays one PUT per group.
   */
  async landKept(landing: Landing): Promise<string> {
    const key = await this.land(landing, true);
    const runFolder = runFolderOfKey(key);
    await this.settle(key, async () => undefined, (frame) => this.catalog.keepWaitingAnswer({ runId: landing.run_id, runFolder, key, frame }));
    return key;
  }

  /** An answer this process landed and has not uploaded yet. */
  pendingLanding(key: string): Landing | undefined {
    return this.pending.get(key)?.landing;
  }

  /**
   * Settles a call whose answer this process landed: with `settle` alone when the answer is
   * uploaded, else with `keep`, which commits the settlement and the answer's frame to the catalog
   * together; the upload then forgets the frame there (put).
   */
  async settle(key: string, settle: () => Promise<void>, keep: (frame: Buffer) => Promise<number>): Promise<void> {
    const pending = this.pending.get(key);
    if (!pending) return settle();
    const kept = keep(pending.frame);
    pending.kept.push(kept);
    await kept;
  }

  /** Uploads every answer landed so far; throws if one of their uploads failed. */
  async flush(): Promise<void> {
    const uploads: Promise<void>[] = [];
    for (const [runFolder, group] of this.groups) {
      if (group.flying) uploads.push(group.flying);
      if (group.waiting.length > 0) uploads.push(group.next.done);
      this.upload(runFolder, group);
    }
    await Promise.all(uploads);
  }

  /**
   * Fetches into the scratch directory the run's segment objects it lacks, unless a listing of them
   * began less than RELIST_EVERY_MS ago (then waits for that one), and the run's answers waiting in
   * the catalog: a missed key costs one LIST and one query a second per run, however many calls
   * miss, and a listing returns the run's own segments only. An
   * answer another worker uploaded in that second may be missed by a work checking whether another
   * target already bought it (it is then bought again, as when two workers ask at once), never by
   * a retried work: its claim lists afresh (SettledWithAnswer.claim).
   */
  async stageRun(runFolder: string): Promise<void> {
    const now = Date.now();
    const last = this.listings.get(runFolder);
    if (last && now - last.startedAt < RELIST_EVERY_MS) return last.done;
    const listing: RunListing = {
      startedAt: now,
      done: this.stage(objectPrefix(this.dataDir, runSegmentFolder(this.dataDir, runFolder))).then(() => this.stageWaiting(runFolder)),
    };
    this.listings.set(runFolder, listing);
    try {
      await listing.done;
    } catch (error) {
      if (this.listings.get(runFolder) === listing) this.listings.delete(runFolder);
      throw error;
    }
  }

  /** The next missed key of the run lists its segment objects again, however recent the last listing. */
  listAfresh(runFolder: string): void {
    this.listings.delete(runFolder);
  }

  /**
   * Fetches every segment object of the store the scratch directory lacks, and the answers waiting
   * in the catalog for their upload: the loader's, before a load.
   */
  async stageAll(): Promise<void> {
    await this.stage(objectPrefix(this.dataDir, segmentRoot(this.dataDir)));
    await this.stageWaiting();
  }

  /** Deletes a run's segment objects and its answers waiting in the catalog (its answers are in the lake, and it is over). */
  async removeRun(runFolder: string): Promise<void> {
    const prefix = objectPrefix(this.dataDir, runSegmentFolder(this.dataDir, runFolder));
    for (const object of await this.objects.list(prefix)) await this.objects.delete(object);
    await this.catalog.removeWaitingAnswers(runFolder);
    this.listings.delete(runFolder);
  }

  /** Uploads the run's waiting answers as one segment object, after the upload under way if there is one. */
  private upload(runFolder: string, group: RunGroup): void {
    if (group.waiting.length === 0) return;
    if (group.flying) {
      group.again = true;
      return;
    }
    clearTimeout(group.timer);
    group.timer = undefined;
    const landings = group.waiting;
    const upload = group.next;
    group.waiting = [];
    group.bytes = 0;
    group.next = newUpload();
    group.flying = this.put(group.runId, runFolder, landings, upload.done).then(upload.resolve, upload.reject);
    void group.flying.then(() => {
      group.flying = undefined;
      if (group.again || group.waiting.length >= GROUP_MAX_FRAMES) {
        group.again = false;
        this.upload(runFolder, group);
      } else if (group.waiting.length > 0) group.timer ??= setTimeout(() => this.upload(runFolder, group), GROUP_WAIT_MS);
      else if (this.groups.get(runFolder) === group) this.groups.delete(runFolder);
    });
  }

  /**
   * Puts one segment object, keeps a copy in the scratch directory, and forgets its answers as
   * pending, then in the catalog those settled meanwhile. A failed upload leaves them in the
   * catalog, where readers and the loader find them (stageWaiting).
   */
  private async put(runId: string, runFolder: string, landings: WaitingLanding[], done: Promise<void>): Promise<void> {
    const file = runSegmentFile(this.dataDir, runFolder, newSegmentFileName());
    const bytes = Buffer.concat([Buffer.from(segmentHeaderText({ run_id: runId }), 'utf8'), ...landings.map((landing) => landing.frame)]);
    const kept: Promise<number>[] = [];
    try {
      // In the background, where the activity's own wait (activities/outages.ts) does not reach:
      // an object store that does not answer is waited out here, as a landing's PUT was.
      await waitOutOutages(() => this.objects.put(objectKey(this.dataDir, file), bytes), { boundMs: this.outageWaitMs });
      // The scratch copy spares a fetch; without it the segment is fetched when a key is missed.
      await writeCached(file, bytes).catch(() => undefined);
    } finally {
      // At once with the upload's end: a settlement after this finds its answer not pending, and settles alone.
      for (const { key } of landings) {
        const pending = this.pending.get(key);
        if (pending?.uploaded !== done) continue;
        kept.push(...pending.kept);
        this.pending.delete(key);
      }
    }
    const seqs = (await Promise.allSettled(kept)).flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
    // A row not forgotten is a copy of an uploaded answer, read once by a load and removed with its run.
    await waitOutOutages(() => this.catalog.forgetWaitingAnswers(seqs), { boundMs: this.outageWaitMs }).catch(() => undefined);
  }

  /**
   * Writes the answers waiting in the catalog (a run's, or every run's) into the scratch directory,
   * one segment per run named after the rows it holds: the same rows make the same name, which a
   * load that read it already passes over, and a later set makes another.
   */
  private async stageWaiting(runFolder?: string): Promise<void> {
    const byRun = new Map<string, WaitingAnswer[]>();
    for (const answer of await this.catalog.waitingAnswers(runFolder)) {
      const answers = byRun.get(answer.runFolder);
      if (answers) answers.push(answer);
      else byRun.set(answer.runFolder, [answer]);
    }
    for (const [folder, answers] of byRun) {
      const seqs = answers.map((answer) => answer.seq);
      const digest = createHash('sha256').update(seqs.join(',')).digest('hex').slice(0, 16);
      const name = segmentFileName({ writer: `catalog-${seqs[0]}-${digest}`, seq: seqs[seqs.length - 1]! });
      const file = runSegmentFile(this.dataDir, folder, name);
      if (await stat(file).then(() => true, () => false)) continue;
      await writeCached(file, Buffer.concat([Buffer.from(segmentHeaderText({ run_id: answers[0]!.runId }), 'utf8'), ...answers.map((answer) => answer.frame)]));
    }
  }

  /** Fetches the segment objects under `prefix` that the scratch directory lacks whole. */
  private async stage(prefix: string): Promise<void> {
    const objects = (await this.objects.listSized(prefix)).filter((object) => isSegmentObjectKey(object.key));
    const missing: string[] = [];
    for (const object of objects) {
      const size = await stat(fileOfObjectKey(this.dataDir, object.key)).then((found) => found.size, () => -1);
      if (size !== object.size) missing.push(object.key);
    }
    await this.objects.getEach(missing, (key, bytes) => writeCached(fileOfObjectKey(this.dataDir, key), bytes));
  }
}

/** Writes a cached copy whole under its name (a temporary renamed), without fsync: the object store has it. */
async function writeCached(file: string, bytes: Buffer): Promise<void> {
  await mkdir(dirname(file), { recursive: true });
  const temporary = temporaryFor(file);
  try {
    await writeFile(temporary, bytes);
    await rename(temporary, file);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}

/**
 * A work's journal in the shared catalog, whose settlements keep their answer there while it is not
 * uploaded (SharedSegments.settle): a settled call's answer outlives the worker that bought it.
 * `sync` uploads what the process landed, so a work's answers are in the object store, and out of
 * the catalog, when it checkpoints or returns; an upload that fails leaves them in the catalog.
 */
export class SettledWithAnswer implements JournalLog {
  constructor(
    private readonly log: PostgresJournalLog,
    private readonly segments: SharedSegments,
    private readonly runId: string,
    private readonly runFolder: string,
  ) {}

  get work(): string {
    return this.log.work;
  }

  records(): Promise<JournalLine[]> {
    return this.log.records();
  }

  /**
   * A new attempt of the work: the run's segment objects are listed afresh at its first missed key,
   * so it finds every answer its earlier attempts uploaded, wherever they ran.
   */
  claim(attempt: number): Promise<void> {
    this.segments.listAfresh(this.runFolder);
    return this.log.claim(attempt);
  }

  owner(): Promise<number | undefined> {
    return this.log.owner();
  }

  async append(line: JournalLine): Promise<void> {
    if (!('settled' in line)) return this.log.append(line);
    const key = line.settled;
    await this.segments.settle(
      key,
      () => this.log.append(line),
      (frame) => this.log.appendWithAnswer(line, { runId: this.runId, runFolder: this.runFolder, key, frame }),
    );
  }

  async sync(): Promise<void> {
    // An upload that failed (past its outage wait) left its answers in the catalog with their
    // settlements: the work goes on, and every reader finds them there.
    await this.segments.flush().catch(() => undefined);
    await this.log.sync();
  }

  close(): Promise<void> {
    return this.log.close();
  }
}
