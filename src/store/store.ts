/**
 * Everything the harvest keeps outside the warehouse, behind one interface: the call journal,
 * landings and their quarantine, listing coverage, the job registry, the credits-low alert, media
 * files and the mark of the lake's last maintenance. Two backends:
 * - LocalStore (here): the data directory, as files; the embedded default;
 * - SharedStore (src/store/shared): S3-compatible object storage for landings, quarantine and
 *   media, and PostgreSQL for what must be transactional and shared (the journal, coverage, jobs,
 *   the alert, the maintenance mark), so workers on many machines, each with its own scratch directory, share one store.
 * Which one a process uses is configured by HARVESTER_STORAGE and HARVESTER_CATALOG
 * (store-from-environment.ts).
 */
import { resolve } from 'node:path';
import pLimit, { type LimitFunction } from 'p-limit';
import { clearCreditsLow, creditsLow, markCreditsLow, type CreditsLow } from './credit-alerts.js';
import type { JournalStore } from './call-journal.js';
import { FileBudgetLedger, type BudgetLedger } from './budget-ledger.js';
import { FileJournals } from './file-journal.js';
import { findJob, findJobOfTarget, registerJob, type JobRecord } from './job-registry.js';
import { existsSync } from 'node:fs';
import { removeRunAnswers } from './answer-segments.js';
import { AnswerSegments, type Landing } from './landing.js';
import { quarantinedLandingsOfRun, quarantineLanding, quarantineText, requeueQuarantinedLandings } from './quarantine.js';
import { landingFile, runFolderOfRun } from './layout.js';
import { readCoverage, writeCoverage, type ListingCoverage } from './listing-coverage.js';
import { lakeMaintainedAt, markLakeMaintained } from './maintenance-mark.js';
import { describeMedia, mediaLanding, writeMediaCopy, type StoredMedia } from './media-store.js';
import { dataDirectoryIdentity, type StoreIdentity } from './store-identity.js';

export interface LandingOptions {
  /** Readable by other processes from the work's next journal sync on, not at once. */
  untilSync?: boolean;
}

export interface Store {
  /** This process's own directory: the whole store for LocalStore, a scratch directory for SharedStore. */
  readonly dataDir: string;
  /** Where the store is, for logs and errors: never a secret. */
  readonly description: string;
  readonly journals: JournalStore;
  /** The ledger of the budgets across runs: a file of the data directory, or PostgreSQL's tables (budget-ledger.ts). */
  readonly budgets: BudgetLedger;

  /**
   * Lands an answer, with the answers that arrive with it (a group commit: segment.ts,
   * shared/shared-segments.ts), and returns its key once every loader of the store can read it;
   * with `untilSync`, once this process can, the others following at its journal's next sync
   * (for a work's metered calls: their settlements wait for that sync).
   */
  writeLanding(landing: Landing, options?: LandingOptions): Promise<string>;
  findLanding(key: string): Promise<Landing | undefined>;
  isLanded(key: string): Promise<boolean>;
  /**
   * Makes the store's landings not in `dataDir` yet readable there, where the loader reads them; a
   * no-op when that folder is the store.
   */
  stageLandings(): Promise<void>;
  /**
   * Removes a run's answers once all of them are in the lake and the run is over for good: the
   * data directory (and the object store) keeps only what is not loaded, or may still be read back.
   */
  removeRunAnswers(runFolder: string): Promise<void>;
  /** Sets aside a landing the loader cannot load, with its reason; returns where it now is. */
  quarantineLanding(key: string, reason: string): Promise<string>;
  /** A run's quarantined landings, as quarantineLine says them. */
  quarantinedLandingsOfRun(runId: string): Promise<string[]>;
  /** Puts a run's quarantined landings back to be loaded (`harvester retry`); returns how many. */
  requeueQuarantinedLandings(runId: string): Promise<number>;

  /**
   * Makes every answer of the run that this process landed outlive a machine crash: its segment
   * fdatasynced (in a data directory), its uploads acknowledged (with shared storage). For work
   * that lands answers without a journal of its own (a job's results) before it checkpoints.
   */
  makeRunDurable(runId: string): Promise<void>;

  readCoverage(targetKey: string): Promise<ListingCoverage | undefined>;
  writeCoverage(targetKey: string, coverage: ListingCoverage): Promise<void>;

  registerJob(record: JobRecord): Promise<void>;
  findJob(jobId: string): Promise<JobRecord | undefined>;
  findJobOfTarget(runId: string, target: string): Promise<JobRecord | undefined>;

  markCreditsLow(details: Omit<CreditsLow, 'since'>): Promise<void>;
  clearCreditsLow(): Promise<void>;
  creditsLow(): Promise<CreditsLow | undefined>;

  /**
   * Stores a media file a run fetched: framed among the run's answers, durable before any answer
   * landed after it is, and loaded into the lake's `media_files` once per hash (media-store.ts).
   */
  storeMedia(runId: string, bytes: Uint8Array, mimeType: string): Promise<StoredMedia>;

  /**
   * When the lake was last maintained (or first marked, for the daily maintenance after a run's
   * load), in ms; undefined when never. One mark for every process that shares the store.
   */
  lakeMaintainedAt(): Promise<number | undefined>;
  markLakeMaintained(atMs: number): Promise<void>;

  /**
   * Runs `work` as the lake's only writer among every process that shares the store, and among
   * the writers of this process. In a data directory, the loader's own file lock keeps other
   * processes out (src/warehouse/lake.ts openLakeWriter), and a queue keeps this one's in turn.
   */
  asLakeWriter<T>(work: () => Promise<T>): Promise<T>;

  /**
   * The store's identity, made the first time it is asked for (store-identity.ts): runs carry it,
   * and a worker refuses the tasks of a run started for another store. A data directory's is read
   * at each ask (a small file), so one emptied and made again is a new store.
   */
  identity(): Promise<StoreIdentity>;

  close(): Promise<void>;
}

/** The data directory as the whole store: files, written durably (src/store/durable-file.ts). */
export class LocalStore implements Store {
  readonly journals: JournalStore;
  readonly budgets: BudgetLedger;
  readonly description: string;
  /**
   * The data directory's landings are its segments' (AnswerSegments, landing.ts: one per data directory and
   * process): a landing is handed to them as it is, with no step of its own here.
   */
  readonly writeLanding: (landing: Landing) => Promise<string>;
  readonly findLanding: (key: string) => Promise<Landing | undefined>;
  readonly isLanded: (key: string) => Promise<boolean>;

  constructor(readonly dataDir: string) {
    const segments = AnswerSegments.of(dataDir);
    this.journals = new FileJournals(dataDir, (runId) => segments.syncRun(runFolderOfRun(runId)));
    this.description = `directory ${dataDir}`;
    this.budgets = new FileBudgetLedger(dataDir);
    this.writeLanding = segments.land.bind(segments);
    this.findLanding = segments.find.bind(segments);
    this.isLanded = segments.isLanded.bind(segments);
  }

  async stageLandings(): Promise<void> {
    // The data directory is the store.
  }

  async makeRunDurable(runId: string): Promise<void> {
    await AnswerSegments.of(this.dataDir).syncRun(runFolderOfRun(runId));
  }

  async removeRunAnswers(runFolder: string): Promise<void> {
    await AnswerSegments.of(this.dataDir).forgetRun(runFolder);
    await removeRunAnswers(this.dataDir, runFolder);
  }

  async quarantineLanding(key: string, reason: string): Promise<string> {
    if (existsSync(landingFile(this.dataDir, key))) return quarantineLanding(this.dataDir, key, reason);
    // A frame of a segment: its text is set aside as a file, and its load skips it from then on.
    const text = await AnswerSegments.of(this.dataDir).text(key);
    return quarantineText(this.dataDir, key, text ?? '', reason);
  }

  async quarantinedLandingsOfRun(runId: string): Promise<string[]> {
    return quarantinedLandingsOfRun(this.dataDir, runId);
  }

  async requeueQuarantinedLandings(runId: string): Promise<number> {
    return requeueQuarantinedLandings(this.dataDir, runId);
  }

  async readCoverage(targetKey: string): Promise<ListingCoverage | undefined> {
    return readCoverage(this.dataDir, targetKey);
  }

  async writeCoverage(targetKey: string, coverage: ListingCoverage): Promise<void> {
    writeCoverage(this.dataDir, targetKey, coverage);
  }

  async registerJob(record: JobRecord): Promise<void> {
    registerJob(this.dataDir, record);
  }

  async findJob(jobId: string): Promise<JobRecord | undefined> {
    return findJob(this.dataDir, jobId);
  }

  async findJobOfTarget(runId: string, target: string): Promise<JobRecord | undefined> {
    return findJobOfTarget(this.dataDir, runId, target);
  }

  async markCreditsLow(details: Omit<CreditsLow, 'since'>): Promise<void> {
    markCreditsLow(this.dataDir, details);
  }

  async clearCreditsLow(): Promise<void> {
    clearCreditsLow(this.dataDir);
  }

  async creditsLow(): Promise<CreditsLow | undefined> {
    return creditsLow(this.dataDir);
  }

  /** The frame goes first into the run's segment, so the sync that makes the download's answer durable makes the file durable too. */
  async storeMedia(runId: string, bytes: Uint8Array, mimeType: string): Promise<StoredMedia> {
    const media = describeMedia(bytes, mimeType);
    await this.writeLanding(mediaLanding(runId, media, bytes));
    await writeMediaCopy(this.dataDir, media, bytes);
    return media;
  }

  async lakeMaintainedAt(): Promise<number | undefined> {
    return lakeMaintainedAt(this.dataDir);
  }

  async markLakeMaintained(atMs: number): Promise<void> {
    markLakeMaintained(this.dataDir, atMs);
  }

  asLakeWriter<T>(work: () => Promise<T>): Promise<T> {
    return lakeWriterQueue(this.dataDir)(work);
  }

  async identity(): Promise<StoreIdentity> {
    return dataDirectoryIdentity(this.dataDir);
  }

  async close(): Promise<void> {
    // The budget ledger's file, if a call opened it; nothing else is held open.
    await this.budgets.close();
  }
}

/**
 * One lake writer at a time within this process, per data directory. The loader's file lock is an
 * OS lock, and the OS grants a process's lock to the process again: a load and the daily
 * maintenance in one load process both took it, wrote the lake's catalog at once, and deadlocked
 * ("database is locked"). Writers of one process wait here for each other; other processes wait
 * on the file lock.
 */
const lakeWriterQueues = new Map<string, LimitFunction>();
function lakeWriterQueue(dataDir: string): LimitFunction {
  const folder = resolve(dataDir);
  let queue = lakeWriterQueues.get(folder);
  if (!queue) {
    queue = pLimit(1);
    lakeWriterQueues.set(folder, queue);
  }
  return queue;
}
