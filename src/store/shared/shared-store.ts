/**
 * The store shared by workers on many machines: landings, quarantine and media in S3-compatible
 * object storage, and the journals, coverage, job registry and credits-low alert in PostgreSQL
 * (PostgresCatalog). A retry on any machine therefore resumes from what a dead worker landed and
 * journaled, and pays at most the calls that were in flight when it died.
 *
 * The worker's own data directory is scratch: each landing is written there too, as a cache that
 * spares reading it back from the object store, and the loader stages there the landings it loads.
 */
import { existsSync, readFileSync } from 'node:fs';
import type { CreditsLow } from '../credit-alerts.js';
import { writeDurableFile } from '../durable-file.js';
import type { JobRecord } from '../job-registry.js';
import { removeRunAnswers } from '../answer-segments.js';
import { landingKey, landingText, quarantineLanding, quarantineLine, writeLanding, type Landing } from '../landing.js';
import { landingFile, landingRoot, mediaFile, objectKey, pathSegment, quarantineFile, quarantineRoot } from '../layout.js';
import type { ListingCoverage } from '../listing-coverage.js';
import { describeMedia, type StoredMedia } from '../media-store.js';
import type { Store } from '../store.js';
import type { StoreIdentity } from '../store-identity.js';
import type { PostgresCatalog } from './postgres-catalog.js';
import type { ObjectStorage } from './object-storage.js';

/** The one credits-low alert's key among the catalog's alert documents. */
const CREDITS_LOW = 'credits-low';
/** The lake's last maintenance: one mark for every machine, so the daily maintenance runs once a day, not once per machine. */
const LAKE_MAINTAINED = 'lake-maintained';

/** Objects fetched at once when the loader stages landings. */
const STAGING_FETCHES = 16;

export class SharedStore implements Store {
  readonly description: string;
  #identity: Promise<StoreIdentity> | undefined;

  constructor(
    readonly dataDir: string,
    private readonly objects: ObjectStorage,
    readonly catalog: PostgresCatalog,
  ) {
    this.description = `${objects.url('')} with the catalog ${catalog.where}`;
  }

  get journals(): PostgresCatalog {
    return this.catalog;
  }

  /** Landed once it is in the object store; the scratch copy is a cache. */
  async writeLanding(landing: Landing): Promise<string> {
    const key = landingKey(landing);
    await this.objects.put(this.landingObject(key), landingText(landing));
    writeLanding(this.dataDir, landing);
    return key;
  }

  async findLanding(key: string): Promise<Landing | undefined> {
    const cached = landingFile(this.dataDir, key);
    if (existsSync(cached)) return JSON.parse(readFileSync(cached, 'utf8')) as Landing;
    const bytes = await this.objects.get(this.landingObject(key));
    if (!bytes) return undefined;
    writeDurableFile(cached, bytes, { what: 'landing' });
    return JSON.parse(bytes.toString('utf8')) as Landing;
  }

  async isLanded(key: string): Promise<boolean> {
    return existsSync(landingFile(this.dataDir, key)) || (await this.objects.exists(this.landingObject(key)));
  }

  /**
   * Fetches every landing of the store not in the scratch directory yet. The store holds only the
   * landings of runs not over or not loaded (removeRunAnswers), so the listing does not grow with history.
   */
  async stageLandings(): Promise<void> {
    const prefix = `${objectKey(this.dataDir, landingRoot(this.dataDir))}/`;
    const missing = (await this.objects.list(prefix))
      .map((object) => object.slice(prefix.length))
      .filter((key) => key.endsWith('.json') && !existsSync(landingFile(this.dataDir, key)));
    for (let start = 0; start < missing.length; start += STAGING_FETCHES) {
      await Promise.all(
        missing.slice(start, start + STAGING_FETCHES).map(async (key) => {
          const bytes = await this.objects.get(this.landingObject(key));
          if (bytes) writeDurableFile(landingFile(this.dataDir, key), bytes, { what: 'landing' });
        }),
      );
    }
  }

  async removeRunAnswers(runFolder: string): Promise<void> {
    const prefix = `${objectKey(this.dataDir, landingRoot(this.dataDir))}/${runFolder}/`;
    for (const object of await this.objects.list(prefix)) await this.objects.delete(object);
    await removeRunAnswers(this.dataDir, runFolder);
  }

  /**
   * The reason first, then the landing's bytes under quarantine/, and only then is the landing
   * deleted: a worker killed between them leaves the landing where it was, to be quarantined again.
   */
  async quarantineLanding(key: string, reason: string): Promise<string> {
    const bytes = (await this.objects.get(this.landingObject(key))) ?? readFileSync(landingFile(this.dataDir, key));
    const quarantined = this.quarantineObject(key);
    await this.objects.put(`${quarantined}.reason`, `${reason}\n`);
    await this.objects.put(quarantined, bytes);
    await this.objects.delete(this.landingObject(key));
    // Out of the scratch directory too, or its next load would find it there.
    if (existsSync(landingFile(this.dataDir, key))) quarantineLanding(this.dataDir, key, reason);
    return this.objects.url(quarantined);
  }

  async quarantinedLandingsOfRun(runId: string): Promise<string[]> {
    const prefix = `${objectKey(this.dataDir, quarantineRoot(this.dataDir))}/${pathSegment(runId)}/`;
    const objects = new Set(await this.objects.list(prefix));
    const lines: string[] = [];
    for (const object of objects) {
      if (object.endsWith('.reason') || !objects.has(`${object}.reason`)) continue;
      const reason = (await this.objects.get(`${object}.reason`))?.toString('utf8').trim() ?? '';
      lines.push(quarantineLine({ file: this.objects.url(object), reason }));
    }
    return lines.sort();
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

  /** Content-addressed, as in a data directory: an object already there under the hash is not written again. */
  async storeMedia(bytes: Uint8Array, mimeType: string): Promise<StoredMedia> {
    const media = describeMedia(bytes, mimeType);
    const object = objectKey(this.dataDir, mediaFile(this.dataDir, media.sha256));
    if (!(await this.objects.exists(object))) await this.objects.put(object, bytes);
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

  private landingObject(key: string): string {
    return objectKey(this.dataDir, landingFile(this.dataDir, key));
  }

  private quarantineObject(key: string): string {
    return objectKey(this.dataDir, quarantineFile(this.dataDir, key));
  }
}
