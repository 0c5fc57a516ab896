/**
 * With shared storage, the lake's data files are objects: each is acknowledged by the object store
 * (its upload completed) before the catalog commit (PostgreSQL) that names it. Shown by listing the
 * bucket inside each load transaction, just before COMMIT: every file the catalog names afterwards
 * was there, whole (its size the catalog's), when its commit was made.
 */
import { chmodSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSharedServices, type SharedServices } from '../../src/cli/shared-services.js';
import { ObjectStorage } from '../../src/store/shared/object-storage.js';
import { objectStorageSettings } from '../../src/store/shared/shared-settings.js';
import { storeFromEnvironment } from '../../src/store/store-from-environment.js';
import type { Store } from '../../src/store/store.js';
import { lakeLocation, openLake } from '../../src/warehouse/lake.js';
import { DamagedLakeError, referencedLakeFiles } from '../../src/warehouse/lake-health.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { loadLandings } from '../../src/warehouse/loader.js';
import { landedKeys, landedLanding } from '../support/landed.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { landedSample } from '../support/sample-harvest.js';

let services: SharedServices;
let emulator: TestEmulator;
const savedEnv = { ...process.env };
const stores: Store[] = [];

beforeAll(async () => {
  const folder = mkdtempSync(join(tmpdir(), 'shared-lake-puts-'));
  // PostgreSQL may run as another user (see startPostgres): it must reach its folder.
  chmodSync(folder, 0o755);
  [services, emulator] = await Promise.all([startSharedServices(folder), startTestEmulator()]);
}, 120_000);
afterAll(async () => {
  process.env = savedEnv;
  for (const store of stores) await store.close();
  await emulator?.close();
  await services?.stop();
});

async function sharedEnvironment(name: string): Promise<Record<string, string>> {
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

describe('the shared lake', () => {
  it('has every data file it names acknowledged by the object store, whole, before the commit that names it', async () => {
    const env = await sharedEnvironment('lake_puts');
    const store = await storeFromEnvironment(mkdtempSync(join(tmpdir(), 'machine-')), { ...process.env, ...env });
    stores.push(store);
    const objects = new ObjectStorage(objectStorageSettings(env.HARVESTER_STORAGE!, { ...process.env, ...env }));
    const { dataDir: sampleDir } = await landedSample(emulator, 'run-shared-puts');
    for (const key of landedKeys(sampleDir)) await store.writeLanding(landedLanding(sampleDir, key));

    const beforeCommits: Array<Map<string, number>> = [];
    await loadLandings(store.dataDir, {
      store,
      beforeCommit: async () => {
        beforeCommits.push(new Map((await objects.listSized('lake/data/')).map(({ key, size }) => [key, size])));
      },
    });
    expect(beforeCommits.length).toBeGreaterThan(0);
    const lastCommit = beforeCommits.at(-1)!;

    const location = lakeLocation(store.dataDir);
    const lake = await openLake(store.dataDir, 'read');
    const named = await referencedLakeFiles(lake.connection, location.dataPath).finally(() => lake.close());
    expect(named.length).toBeGreaterThan(5);
    const bucketRoot = `${env.HARVESTER_STORAGE!.replace(/\/$/, '')}/`;
    for (const file of named) {
      const key = file.path.slice(bucketRoot.length);
      expect({ key, acknowledgedBeforeCommit: lastCommit.get(key) }).toEqual({ key, acknowledgedBeforeCommit: file.bytes });
    }
    objects.close();
  });

  it('names a referenced object that is missing or cut, refuses a reader, and is repaired by the next load from the raw answers', async () => {
    const env = await sharedEnvironment('lake_damaged');
    const store = await storeFromEnvironment(mkdtempSync(join(tmpdir(), 'machine-')), { ...process.env, ...env });
    stores.push(store);
    const objects = new ObjectStorage(objectStorageSettings(env.HARVESTER_STORAGE!, { ...process.env, ...env }));
    const { dataDir: sampleDir, expected } = await landedSample(emulator, 'run-shared-damaged');
    for (const key of landedKeys(sampleDir)) await store.writeLanding(landedLanding(sampleDir, key));
    await loadLandings(store.dataDir, { store });

    const location = lakeLocation(store.dataDir);
    const lake = await openLake(store.dataDir, 'write');
    const named = await referencedLakeFiles(lake.connection, location.dataPath).finally(() => lake.close());
    const bucketRoot = `${env.HARVESTER_STORAGE!.replace(/\/$/, '')}/`;
    const items = named.find((file) => file.table === 'items' && file.kind === 'data')!;
    const calls = named.find((file) => file.table === 'api_calls' && file.kind === 'data')!;
    await objects.delete(items.path.slice(bucketRoot.length));
    const whole = (await objects.get(calls.path.slice(bucketRoot.length)))!;
    await objects.put(calls.path.slice(bucketRoot.length), whole.subarray(0, whole.length - 100));

    const refused = await openLake(store.dataDir, 'read').catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(DamagedLakeError);
    expect((refused as Error).message).toContain(`table items: data file ${items.path} is missing`);
    expect((refused as Error).message).toContain(`table api_calls: data file ${calls.path} is ${whole.length - 100} bytes where the catalog says ${whole.length} (torn)`);

    const repaired = await loadLandings(store.dataDir, { store });
    expect(repaired.repair?.damaged.map((file) => file.path).sort()).toEqual([items.path, calls.path].sort());
    expect(repaired.repair?.rebuilt).toBe(true);
    expect(repaired.repair?.lost).toEqual([]);
    const { rows } = await queryWarehouse(store.dataDir, 'SELECT (SELECT count(*) FROM items) AS items, (SELECT sum(credits) FROM api_calls) AS credits');
    expect(rows.map((row) => ({ items: Number(row.items), credits: Number(row.credits) }))).toEqual([{ items: expected.itemIds.size, credits: expected.credits }]);
    objects.close();
  });
});
