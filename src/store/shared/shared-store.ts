/**
 * The store shared by workers on many machines: answers (in segments, shared-segments.ts),
 * quarantine and media in S3-compatible object storage, and the journals, coverage, job registry and credits-low alert in PostgreSQL
 * (PostgresCatalog). A retry on any machine therefore resumes from what a dead worker landed and
 * journaled, and pays at most the calls that were in flight when it died.
 *
 * The worker's own data directory is scratch: each segment it uploads is written there too, as a
 * cache that spares reading it back from the object store, and the loader stages there the
 * segments it loads.
 */
import { existsSync, readFileSync } from 'node:fs';
import type { CreditsLow } from '../credit-alerts.js';
import { writeDurableFile } from '../durable-file.js';
import type { JobRecord } from '../job-registry.js';
import { AnswerSegments, removeRunAnswers } from '../answer-segments.js';
import type { Landing } from '../landing.js';
import { quarantineLanding, quarantineLine, quarantineText, requeueQuarantinedLandings } from '../quarantine.js';
import { isReasonFile, keyOfObject, landingFile, landingRoot, objectKey, objectPrefix, quarantineFile, quarantineRoot, reasonFileOf, runFolderOfKey, runFolderOfRun, runLandingFolder, runQuarantineFolder } from '../layout.js';
import type { ListingCoverage } from '../listing-coverage.js';
import { describeMedia, mediaLanding, type StoredMedia } from '../media-store.js';
import type { LandingOptions, Store } from '../store.js';
import type { JournalStore } from '../call-journal.js';
import type { StoreIdentity } from '../store-identity.js';
import type { PostgresCatalog } from './postgres-catalog.js';
import { PostgresBudgetLedger } from './postgres-budget-ledger.js';
import type { BudgetLedger } from '../budget-ledger.js';
import type { ObjectStorage } from './object-storage.js';
import { SettledWithAnswer, SharedSegments } from './shared-segments.js';

/** The one credits-low alert's key among the catalog's alert documents. */
const CREDITS_LOW = 'credits-low';
/** The lake's last maintenance: one mark for every machine, so the daily maintenance runs once a day, not once per machine. */
const LAKE_MAINTAINED = 'lake-maintained';


export class SharedStore implements Store {
  readonly description: string;
  private readonly segments: SharedSegments;
  /** Whether a run has landing objects of an earlier version, by run folder. */
  private readonly landingObjectRuns = new Map<string, Promise<boolean>>();
  readonly #journals: JournalStore;
  /** The budgets across runs, in the catalog's tables (postgres-budget-ledger.ts). */
  readonly budgets: BudgetLedger;
  #identity: Promise<StoreIdentity> | undefined;

  constructor(
    readonly dataDir: string,
    private readonly objects: ObjectStorage,
    readonly catalog: PostgresCatalog,
    /** How long its uploads and settlements in the background wait out an outage (HARVESTER_OUTAGE_WAIT_SECONDS). */
    outageWaitMs?: number,
  ) {
    this.description = `${objects.url('')} with the catalog ${catalog.where}`;
    this.segments = new SharedSegments(objects, catalog, dataDir, outageWaitMs);
    this.budgets = new PostgresBudgetLedger(catalog);
    const segments = this.segments;
    this.#journals = {
      journalLog: (runId, workId) => new SettledWithAnswer(catalog.journalLog(runId, workId), segments, runId, runFolderOfRun(runId)),
      runJournalLogs: (runId) => catalog.runJournalLogs(runId),
      removeRunJournals: (runIds) => catalog.removeRunJournals(runIds),
      markArchiving: (runIds) => catalog.markArchiving(runIds),
      archivingMarked: (runIds) => catalog.archivingMarked(runIds),
      lateLog: (runId, workId) => catalog.lateLog(runId, workId),
      lateLogs: () => catalog.lateLogs(),
      removeLateLogs: (runIds) => catalog.removeLateLogs(runIds),
    };
  }

  /** The catalog's journals, each settlement kept with its answer until the answer is uploaded (SettledWithAnswer). */
  get journals(): JournalStore {
    return this.#journals;
  }

  async makeRunDurable(): Promise<void> {
    // Every upload of this process, whatever its run: a landing without `untilSync` is already
    // uploaded when it resolves, so this waits only for those landed with it.
    await this.segments.flush();
  }

  /** Landed once the segment object holding it is uploaded, or with `untilSync` at the journal's next sync (shared-segments.ts). */
  writeLanding(landing: Landing, options: LandingOptions = {}): Promise<string> {
    return this.segments.land(landing, options.untilSync ?? false);
  }

  /**
   * From the scratch directory's segments (this process's uploads, and those of other workers
   * fetched before); when not there, from the run's segment objects that are new since, and then
   * from a landing object of an earlier version.
   */
  async findLanding(key: string): Promise<Landing | undefined> {
    const pending = this.segments.pendingLanding(key);
    if (pending) return pending;
    const scratch = AnswerSegments.of(this.dataDir);
    const found = await scratch.find(key);
    if (found) return found;
    await this.segments.stageRun(runFolderOfKey(key));
    return (await scratch.find(key)) ?? (await this.findLandingObject(key));
  }

  async isLanded(key: string): Promise<boolean> {
    return (await this.findLanding(key)) !== undefined;
  }

  /**
   * Fetches every segment object (and landing object of an earlier version) the scratch directory
   * lacks. The store holds only the answers of runs not over or not loaded (removeRunAnswers), so
   * the listing does not grow with history.
   */
  async stageLandings(): Promise<void> {
    await this.segments.stageAll();
    const prefix = objectPrefix(this.dataDir, landingRoot(this.dataDir));
    const missing = (await this.objects.list(prefix)).filter((object) => object.endsWith('.json') && !existsSync(landingFile(this.dataDir, keyOfObject(prefix, object))));
    await this.objects.getEach(missing, (object, bytes) => writeDurableFile(landingFile(this.dataDir, keyOfObject(prefix, object)), bytes, { what: 'landing' }));
  }

  async removeRunAnswers(runFolder: string): Promise<void> {
    await this.segments.removeRun(runFolder);
    const prefix = objectPrefix(this.dataDir, runLandingFolder(this.dataDir, runFolder));
    for (const object of await this.objects.list(prefix)) await this.objects.delete(object);
    this.landingObjectRuns.delete(runFolder);
    await AnswerSegments.of(this.dataDir).forgetRun(runFolder);
    await removeRunAnswers(this.dataDir, runFolder);
  }

  /**
   * The reason first, then the landing's bytes under quarantine/, and only then is a landing object
   * deleted: a worker killed between them leaves the landing where it was, to be quarantined again.
   * A segment's frame stays in its segment; its copy in the scratch quarantine/ makes loads skip it.
   */
  async quarantineLanding(key: string, reason: string): Promise<string> {
    const object = await this.objects.get(this.landingObject(key));
    const bytes = object ?? (existsSync(landingFile(this.dataDir, key)) ? readFileSync(landingFile(this.dataDir, key)) : Buffer.from((await AnswerSegments.of(this.dataDir).text(key)) ?? '', 'utf8'));
    const quarantined = this.quarantineObject(key);
    await this.objects.put(reasonFileOf(quarantined), `${reason}\n`);
    await this.objects.put(quarantined, bytes);
    if (object) await this.objects.delete(this.landingObject(key));
    // Out of the scratch directory's loads too, or its next load would find it there.
    if (existsSync(landingFile(this.dataDir, key))) quarantineLanding(this.dataDir, key, reason);
    else if (!object) quarantineText(this.dataDir, key, bytes.toString('utf8'), reason);
    return this.objects.url(quarantined);
  }

  async quarantinedLandingsOfRun(runId: string): Promise<string[]> {
    const prefix = objectPrefix(this.dataDir, runQuarantineFolder(this.dataDir, runFolderOfRun(runId)));
    const objects = new Set(await this.objects.list(prefix));
    const lines: string[] = [];
    for (const object of objects) {
      if (isReasonFile(object) || !objects.has(reasonFileOf(object))) continue;
      const reason = (await this.objects.get(reasonFileOf(object)))?.toString('utf8').trim() ?? '';
      lines.push(quarantineLine({ file: this.objects.url(object), reason }));
    }
    return lines.sort();
  }

  /**
   * As the local store's: each quarantined object is put back as a landing object, and only once
   * that PUT is acknowledged are its reason and copy deleted; the scratch directory's copies too.
   */
  async requeueQuarantinedLandings(runId: string): Promise<number> {
    const root = objectPrefix(this.dataDir, quarantineRoot(this.dataDir));
    const objects = new Set(await this.objects.list(objectPrefix(this.dataDir, runQuarantineFolder(this.dataDir, runFolderOfRun(runId)))));
    let requeued = 0;
    for (const object of objects) {
      if (isReasonFile(object) || !objects.has(reasonFileOf(object))) continue;
      const bytes = await this.objects.get(object);
      if (!bytes) continue;
      await this.objects.put(this.landingObject(keyOfObject(root, object)), bytes);
      await this.objects.delete(reasonFileOf(object));
      await this.objects.delete(object);
      requeued++;
    }
    requeueQuarantinedLandings(this.dataDir, runId);
    return requeued;
  }

  readCoverage(targetKey: string): Promise<ListingCoverage | undefined> {
    return this.catalog.getDocument<ListingCoverage>('coverage', targetKey);
  }

  writeCoverage(targetKey: string, coverage: ListingCoverage): Promise<void> {
    return this.catalog.putDocument('coverage', targetKey, coverage);
  }

  async registerJob(record: JobRecord): Promise<void> {
    await this.catalog.putDocument('job', record.jobId, record);
    await this.catalog.putDocument('target-job', `${record.runId}\n${record.target}`, record);
  }

  findJob(jobId: string): Promise<JobRecord | undefined> {
    return this.catalog.getDocument<JobRecord>('job', jobId);
  }

  findJobOfTarget(runId: string, target: string): Promise<JobRecord | undefined> {
    return this.catalog.getDocument<JobRecord>('target-job', `${runId}\n${target}`);
  }

  markCreditsLow(details: Omit<CreditsLow, 'since'>): Promise<void> {
    return this.catalog.putDocument('alert', CREDITS_LOW, { since: new Date().toISOString(), ...details });
  }

  clearCreditsLow(): Promise<void> {
    return this.catalog.deleteDocument('alert', CREDITS_LOW);
  }

  creditsLow(): Promise<CreditsLow | undefined> {
    return this.catalog.getDocument<CreditsLow>('alert', CREDITS_LOW);
  }

  async lakeMaintainedAt(): Promise<number | undefined> {
    const mark = await this.catalog.getDocument<{ at: string }>('mark', LAKE_MAINTAINED);
    return mark ? Date.parse(mark.at) : undefined;
  }

  markLakeMaintained(atMs: number): Promise<void> {
    return this.catalog.putDocument('mark', LAKE_MAINTAINED, { at: new Date(atMs).toISOString() });
  }

  /**
   * Framed with the run's answers, uploaded with their group, and kept in the catalog until then
   * (SharedSegments.landKept): the download's answer, landed next, never outlives its file,
   * whatever becomes of this process, and the file costs no PUT of its own.
   */
  async storeMedia(runId: string, bytes: Uint8Array, mimeType: string): Promise<StoredMedia> {
    const media = describeMedia(bytes, mimeType);
    await this.segments.landKept(mediaLanding(runId, media, bytes));
    return media;
  }

  /** Asked of the catalog once: a shared store's id stays (a failure is asked again). */
  identity(): Promise<StoreIdentity> {
    this.#identity ??= this.catalog.storeIdentity(this.objects.url('')).catch((error: unknown) => {
      this.#identity = undefined;
      throw error;
    });
    return this.#identity;
  }

  /** A lock in the catalog: loaders on other machines would otherwise load the same landings. */
  asLakeWriter<T>(work: () => Promise<T>): Promise<T> {
    return this.catalog.withLock('social-harvester lake writer', work);
  }

  async close(): Promise<void> {
    this.objects.close();
    await this.catalog.close();
  }

  /**
   * A landing of an earlier version, one object per answer: looked for only in runs that have such
   * objects (one LIST per run and process), since no landing is written so any more.
   */
  private async findLandingObject(key: string): Promise<Landing | undefined> {
    const runFolder = runFolderOfKey(key);
    let hasObjects = this.landingObjectRuns.get(runFolder);
    if (!hasObjects) {
      hasObjects = this.objects.list(objectPrefix(this.dataDir, runLandingFolder(this.dataDir, runFolder))).then((objects) => objects.length > 0);
      this.landingObjectRuns.set(runFolder, hasObjects);
      hasObjects.catch(() => this.landingObjectRuns.delete(runFolder));
    }
    if (!(await hasObjects)) return undefined;
    const bytes = await this.objects.get(this.landingObject(key));
    if (!bytes) return undefined;
    writeDurableFile(landingFile(this.dataDir, key), bytes, { what: 'landing' });
    return JSON.parse(bytes.toString('utf8')) as Landing;
  }

  private landingObject(key: string): string {
    return objectKey(this.dataDir, landingFile(this.dataDir, key));
  }

  private quarantineObject(key: string): string {
    return objectKey(this.dataDir, quarantineFile(this.dataDir, key));
  }
}
