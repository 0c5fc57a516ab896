/**
 * The lake's files are on disk before the catalog names them, and a power loss right after a load
 * loses none of it (src/warehouse/lake-sync.ts); a lake whose catalog names a torn file says which
 * file of which table, and is repaired from the raw answers (lake-health.ts, lake-repair.ts).
 * The loads run in a process of their own under strace, which shows each write and fsync.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, statSync, truncateSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/project-paths.js';
import { lakeCatalogFile, lakeDataFolder, segmentRoot } from '../../src/store/layout.js';
import { openLake } from '../../src/warehouse/lake.js';
import { DamagedLakeError, referencedLakeFiles, type LakeFile } from '../../src/warehouse/lake-health.js';
import { loadLandings } from '../../src/warehouse/loader.js';
import { maintainLake } from '../../src/warehouse/maintenance.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { NEVER_INLINED } from '../../src/warehouse/schema.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { landedSample, type SampleExpectation } from '../support/sample-harvest.js';
import { callsOf, indexOf, traced, writtenAfterLastSync, type TracedCall } from '../support/strace.js';

// These tests are about the lake's files: every insert writes one here, as a load of more rows than
// the inlining limit does (lake.ts, inliningRowLimit). The test of a load kept in the catalog says so.
process.env.HARVESTER_LAKE_INLINE_ROWS = '0';

let emulator: TestEmulator;
beforeAll(async () => {
  emulator = await startTestEmulator();
});
afterAll(() => emulator.close());

/** Loads `dataDir` with the built loader in a process of its own, under strace; returns the trace's calls. */
async function tracedLoad(dataDir: string): Promise<TracedCall[]> {
  const script = join(dataDir, 'load.mjs');
  writeFileSync(script, `import { loadLandings } from ${JSON.stringify(join(PROJECT_ROOT, 'dist', 'src', 'warehouse', 'loader.js'))};\nawait loadLandings(process.argv[2]);\n`);
  const trace = join(dataDir, 'load.trace');
  expect(await traced(trace, process.execPath, [script, dataDir])).toBe(0);
  return callsOf(trace);
}

/** Every file of the lake's data folder that a catalog row names (any snapshot, or scheduled for deletion). */
async function allNamedFiles(dataDir: string): Promise<string[]> {
  const lake = await openLake(dataDir, 'read');
  try {
    const reader = await lake.connection.runAndReadAll(
      `SELECT path FROM __ducklake_metadata_lake.ducklake_data_file UNION ALL SELECT path FROM __ducklake_metadata_lake.ducklake_delete_file UNION ALL SELECT path FROM __ducklake_metadata_lake.ducklake_files_scheduled_for_deletion`,
    );
    const names = new Set(reader.getRows().map(([path]) => basename(String(path))));
    return readdirSync(lakeDataFolder(dataDir), { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile() && names.has(entry.name)).map((entry) => join(entry.parentPath, entry.name));
  } finally {
    await lake.close();
  }
}

async function lakeFiles(dataDir: string): Promise<LakeFile[]> {
  const lake = await openLake(dataDir, 'read');
  try {
    return await referencedLakeFiles(lake.connection, `${lakeDataFolder(dataDir)}/`);
  } finally {
    await lake.close();
  }
}

const count = async (dataDir: string, sql: string) => Number(Object.values((await queryWarehouse(dataDir, sql)).rows[0]!)[0]);

async function expectEverything(dataDir: string, expected: SampleExpectation[]) {
  const sum = (field: 'landings' | 'credits' | 'metricRows') => expected.reduce((total, one) => total + one[field], 0);
  expect(await count(dataDir, 'SELECT count(*) FROM loaded_landings')).toBe(sum('landings'));
  expect(await count(dataDir, 'SELECT count(*) FROM raw_answers')).toBe(sum('landings'));
  expect(await count(dataDir, 'SELECT count(*) FROM items')).toBe(new Set(expected.flatMap((one) => [...one.itemIds])).size);
  expect(await count(dataDir, 'SELECT count(*) FROM item_metrics')).toBe(sum('metricRows'));
  expect(await count(dataDir, 'SELECT sum(credits) FROM api_calls')).toBe(sum('credits'));
}

/** Each file was fsynced after it was made, and then its folder, both before the next catalog commit (SQLite unlinks its journal to commit). */
function expectSyncedBeforeCommit(calls: readonly TracedCall[], dataDir: string, files: readonly string[]) {
  const journal = `${lakeCatalogFile(dataDir)}-journal`;
  for (const file of files) {
    const made = indexOf(calls, (call) => call.creates === true && call.path === file);
    const commit = indexOf(calls, (call) => call.call.startsWith('unlink') && call.path === journal, made);
    const synced = indexOf(calls, (call) => call.call.startsWith('fsync') && call.path === file, made);
    const folderSynced = indexOf(calls, (call) => call.call.startsWith('fsync') && call.path === dirname(file), synced);
    expect({ file, made: made >= 0, synced: synced >= 0 && synced < commit }).toEqual({ file, made: true, synced: true });
    expect({ folder: dirname(file), synced: folderSynced >= 0 && folderSynced < commit }).toEqual({ folder: dirname(file), synced: true });
  }
}

/** Two runs landed and loaded (as two days' runs), the second's load traced. */
async function twoLoads(): Promise<{ dataDir: string; expected: SampleExpectation[]; calls: TracedCall[] }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'lake-durable-'));
  const first = (await landedSample(emulator, 'run-day-1', dataDir)).expected;
  await loadLandings(dataDir);
  const second = (await landedSample(emulator, 'run-day-2', dataDir)).expected;
  const calls = await tracedLoad(dataDir);
  return { dataDir, expected: [first, second], calls };
}

describe('the lake is on disk before its catalog names it', () => {
  it('fsyncs every data file a load writes, and its folder, before the catalog commit that names it; the segments go after', async () => {
    const { dataDir, calls } = await twoLoads();
    const written = (await lakeFiles(dataDir)).filter((file) => indexOf(calls, (call) => call.creates === true && call.path === file.path) >= 0);
    expect(written.length).toBeGreaterThan(5);
    expectSyncedBeforeCommit(calls, dataDir, written.map((file) => file.path));
    // The run ended: its segments left the data directory after the last commit, made durable by its folder's fsync.
    const journal = `${lakeCatalogFile(dataDir)}-journal`;
    const removed = indexOf(calls, (call) => call.call.startsWith('unlink') && call.path.startsWith(segmentRoot(dataDir)));
    expect(removed).toBeGreaterThan(0);
    const lastCommit = calls.findLastIndex((call, index) => index < removed && call.call.startsWith('unlink') && call.path === journal);
    expect(indexOf(calls, (call) => call.call.startsWith('fsync') && call.path === dirname(lakeCatalogFile(dataDir)), lastCommit)).toBeLessThan(removed);
  });

  it('fsyncs the delete files of a DELETE and the files of a merge of adjacent files (the maintenance\'s), each before its commit', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'lake-writes-'));
    const script = join(dataDir, 'writes.mjs');
    writeFileSync(
      script,
      `import { openLakeWriter } from ${JSON.stringify(join(PROJECT_ROOT, 'dist', 'src', 'warehouse', 'lake.js'))};
const lake = await openLakeWriter(process.argv[2], 1000, { create: (connection) => connection.run('CREATE TABLE t (a INTEGER, b VARCHAR)') });
for (const start of [0, 10000, 20000]) await lake.connection.run(\`INSERT INTO t SELECT i, 'row ' || i FROM range(\${start}, \${start + 10000}) r(i)\`);
await lake.connection.run("CALL ducklake_merge_adjacent_files('lake')");
await lake.connection.run('DELETE FROM t WHERE a % 7 = 0');
await lake.close();
`,
    );
    const trace = join(dataDir, 'writes.trace');
    expect(await traced(trace, process.execPath, [script, dataDir])).toBe(0);
    const calls = callsOf(trace);
    const parquet = [...new Set(calls.filter((call) => call.creates === true && call.path.startsWith(lakeDataFolder(dataDir)) && call.path.endsWith('.parquet')).map((call) => call.path))];
    // Three inserts, the file they were merged into, and the delete's file.
    expect(parquet.filter((path) => path.endsWith('-delete.parquet'))).toHaveLength(1);
    expect(parquet.filter((path) => !path.endsWith('-delete.parquet'))).toHaveLength(4);
    expectSyncedBeforeCommit(calls, dataDir, parquet);
  });

  it('a table folder made by a transaction whose rows were inlined has its name synced before a later file in it is committed', async () => {
    delete process.env.HARVESTER_LAKE_INLINE_ROWS;
    try {
      const dataDir = mkdtempSync(join(tmpdir(), 'lake-folders-'));
      const script = join(dataDir, 'writes.mjs');
      writeFileSync(
        script,
        `import { openLakeWriter } from ${JSON.stringify(join(PROJECT_ROOT, 'dist', 'src', 'warehouse', 'lake.js'))};
const lake = await openLakeWriter(process.argv[2], 1000, { create: (connection) => connection.run('CREATE TABLE t (a INTEGER, b VARCHAR)') });
await lake.connection.run("INSERT INTO t SELECT i, 'row ' || i FROM range(5) r(i)");
await lake.connection.run("INSERT INTO t SELECT i, 'row ' || i FROM range(5000) r(i)");
await lake.close();
`,
      );
      const trace = join(dataDir, 'writes.trace');
      expect(await traced(trace, process.execPath, [script, dataDir])).toBe(0);
      const calls = callsOf(trace);
      const journal = `${lakeCatalogFile(dataDir)}-journal`;
      const parquet = calls.filter((call) => call.creates === true && call.path.startsWith(lakeDataFolder(dataDir)) && call.path.endsWith('.parquet'));
      expect(parquet).toHaveLength(1);
      const made = indexOf(calls, (call) => call.creates === true && call.path === parquet[0]!.path);
      const commit = indexOf(calls, (call) => call.call.startsWith('unlink') && call.path === journal, made);
      // Every folder between the file and the data folder: made, and its name synced by its parent's fsync before that commit.
      for (let folder = dirname(parquet[0]!.path); folder !== lakeDataFolder(dataDir); folder = dirname(folder)) {
        const mkdir = indexOf(calls, (call) => call.call.startsWith('mkdir') && call.path.replace(/\/+$/, '') === folder);
        const parentSynced = indexOf(calls, (call) => call.call.startsWith('fsync') && call.path === dirname(folder), mkdir);
        expect({ folder, made: mkdir >= 0, nameSynced: parentSynced >= 0 && parentSynced < commit }).toEqual({ folder, made: true, nameSynced: true });
      }
    } finally {
      process.env.HARVESTER_LAKE_INLINE_ROWS = '0';
    }
  });

  it('a power loss right after the load (every file written since its last fsync loses its contents) loses nothing of either run', async () => {
    const { dataDir, expected, calls } = await twoLoads();
    const lost = writtenAfterLastSync(calls, join(dataDir, 'lake'));
    for (const file of lost) truncateSync(file, 0);
    // Nothing the catalog names was among them.
    expect(lost.filter((file) => file.endsWith('.parquet'))).toEqual([]);
    await expectEverything(dataDir, expected);
  });

  it('loads below the inlining limit write a file only for the tables of whole bodies: a power loss right after them loses nothing, the catalog\'s commit holds the other rows', async () => {
    delete process.env.HARVESTER_LAKE_INLINE_ROWS;
    try {
      const { dataDir, expected, calls } = await twoLoads();
      // The second day's rows are in the catalog, but for the tables of whole bodies (raw answers,
      // transcripts: NEVER_INLINED, a body inlined costs the commit far more than its file's fsyncs),
      // whose files are synced before the commit.
      const made = [...new Set(calls.filter((call) => call.creates === true && call.path.startsWith(lakeDataFolder(dataDir)) && call.path.endsWith('.parquet')).map((call) => call.path))];
      const tables = new Set(made.map((path) => basename(dirname(path))));
      expect(tables).toContain('raw_answers');
      expect([...tables].filter((table) => !NEVER_INLINED.includes(table))).toEqual([]);
      expectSyncedBeforeCommit(calls, dataDir, made);
      for (const file of writtenAfterLastSync(calls, join(dataDir, 'lake'))) truncateSync(file, 0);
      await expectEverything(dataDir, expected);
    } finally {
      process.env.HARVESTER_LAKE_INLINE_ROWS = '0';
    }
  });
});

describe('a damaged lake says what it is and mends itself where it can', () => {
  it('a torn data file of items: queries name the file and table; maintain rebuilds items from the raw answers, losing nothing', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'lake-torn-'));
    const expected = (await landedSample(emulator, 'run-torn', dataDir)).expected;
    await loadLandings(dataDir);
    const items = (await lakeFiles(dataDir)).find((file) => file.table === 'items' && file.kind === 'data')!;
    truncateSync(items.path, Math.floor(statSync(items.path).size / 2));
    const refused = await queryWarehouse(dataDir, 'SELECT count(*) FROM api_calls').catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(DamagedLakeError);
    expect((refused as Error).message).toContain(`table items: data file ${items.path} is `);
    const result = await maintainLake(dataDir);
    expect(result.repair?.damaged.map((file) => file.path)).toEqual([items.path]);
    expect(result.repair?.rebuilt).toBe(true);
    expect(result.repair?.lost).toEqual([]);
    await expectEverything(dataDir, [expected]);
  });

  it('a torn raw_answers file: repaired by the next load, and its rows reported as lost, with their count', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'lake-torn-raw-'));
    const expected = (await landedSample(emulator, 'run-torn-raw', dataDir)).expected;
    await loadLandings(dataDir);
    const raw = (await lakeFiles(dataDir)).find((file) => file.table === 'raw_answers' && file.kind === 'data')!;
    truncateSync(raw.path, 0);
    const result = await loadLandings(dataDir);
    expect(result.repair?.lost).toEqual([{ table: 'raw_answers', rows: raw.rows, files: [raw.path] }]);
    expect(raw.rows).toBe(expected.landings);
    // The lake opens again; the typed tables were whole and are kept as they were.
    expect(await count(dataDir, 'SELECT count(*) FROM raw_answers')).toBe(0);
    expect(await count(dataDir, 'SELECT sum(credits) FROM api_calls')).toBe(expected.credits);
  });

  it('a torn raw_answers file of a run still going: its answers are loaded again from its segments, and nothing is reported lost', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'lake-torn-raw-segments-'));
    const expected = (await landedSample(emulator, 'run-torn-raw-going', dataDir, { ended: false })).expected;
    await loadLandings(dataDir);
    // The run is not over: its segments are still in the data directory.
    expect(readdirSync(segmentRoot(dataDir))).not.toEqual([]);
    const answers = async () => (await queryWarehouse(dataDir, 'SELECT landing, run_id, kind, request_id, endpoint, params, observed_at, md5(answer::VARCHAR) AS answer FROM raw_answers ORDER BY landing')).rows;
    const before = await answers();
    const raw = (await lakeFiles(dataDir)).find((file) => file.table === 'raw_answers' && file.kind === 'data')!;
    truncateSync(raw.path, Math.floor(statSync(raw.path).size / 2));
    const result = await loadLandings(dataDir);
    expect(result.repair?.damaged.map((file) => file.path)).toEqual([raw.path]);
    expect(result.repair?.reloaded).toBe(expected.landings);
    expect(result.repair?.lost).toEqual([]);
    expect(await count(dataDir, 'SELECT count(*) FROM raw_answers')).toBe(expected.landings);
    expect(await count(dataDir, 'SELECT count(DISTINCT landing) FROM raw_answers')).toBe(expected.landings);
    expect(await count(dataDir, 'SELECT sum(credits) FROM api_calls')).toBe(expected.credits);
    // The answers loaded again are the same answers, column by column.
    expect(await answers()).toEqual(before);
  });

  it('a torn raw_answers file whose run is partly cleared: what the segments hold is loaded again, the rest reported lost with its count', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'lake-torn-raw-part-'));
    const ended = (await landedSample(emulator, 'run-torn-raw-ended', dataDir)).expected;
    const going = (await landedSample(emulator, 'run-torn-raw-going2', dataDir, { ended: false })).expected;
    await loadLandings(dataDir);
    const raw = (await lakeFiles(dataDir)).filter((file) => file.table === 'raw_answers' && file.kind === 'data');
    expect(raw).toHaveLength(1);
    truncateSync(raw[0]!.path, 0);
    const result = await loadLandings(dataDir);
    expect(result.repair?.reloaded).toBe(going.landings);
    expect(result.repair?.lost).toEqual([{ table: 'raw_answers', rows: ended.landings, files: [raw[0]!.path] }]);
    expect(await count(dataDir, 'SELECT count(*) FROM raw_answers')).toBe(going.landings);
  });

  it('the maintenance removes files a crash left unnamed, and never a file the catalog names, however old', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'lake-orphans-'));
    const expected = (await landedSample(emulator, 'run-orphans', dataDir)).expected;
    await loadLandings(dataDir);
    const named = await allNamedFiles(dataDir);
    const itemsFolder = dirname((await lakeFiles(dataDir)).find((file) => file.table === 'items')!.path);
    const old = new Date(Date.now() - 2 * 3_600_000);
    const orphan = join(itemsFolder, `ducklake-${randomUUID()}.parquet`);
    const young = join(itemsFolder, `ducklake-${randomUUID()}.parquet`);
    const notDuckLake = join(itemsFolder, 'notes.parquet');
    for (const file of [orphan, young, notDuckLake]) writeFileSync(file, 'PAR1 cut short');
    // Every file is old: only the catalog's names keep the named ones.
    for (const file of [orphan, notDuckLake, ...named]) utimesSync(file, old, old);
    const result = await maintainLake(dataDir);
    expect(result.orphanedFilesRemoved).toEqual([orphan]);
    for (const file of [young, notDuckLake]) expect(existsSync(file)).toBe(true);
    for (const file of await allNamedFiles(dataDir)) expect({ file, there: existsSync(file) }).toEqual({ file, there: true });
    await expectEverything(dataDir, [expected]);
  });
});
