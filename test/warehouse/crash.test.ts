import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/project-paths.js';
import { landedKeys } from '../support/landed.js';
import { loadLandings } from '../../src/warehouse/loader.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { landedSample, type SampleExpectation } from '../support/sample-harvest.js';

let emulator: TestEmulator;
beforeAll(async () => {
  emulator = await startTestEmulator();
});
afterAll(() => emulator.close());

/** Runs the built loader in its own process and SIGKILLs it at the named point of a batch (the 2nd by default). */
function loadAndDie(dataDir: string, hook: 'beforeCommit' | 'afterBatch' | 'beforeClear', atBatch = 2): Promise<NodeJS.Signals | null> {
  const script = join(dataDir, 'die.mjs');
  writeFileSync(
    script,
    `import { loadLandings } from ${JSON.stringify(join(PROJECT_ROOT, 'dist', 'src', 'warehouse', 'loader.js'))};
await loadLandings(process.argv[2], { batchLandings: 3, ${hook}: (batch) => { if (batch === ${atBatch}) process.kill(process.pid, 'SIGKILL'); } });
console.log('finished without dying');`,
  );
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [script, dataDir], { stdio: 'inherit' });
    child.once('exit', (_code, signal) => resolve(signal));
  });
}

async function loadedLandings(dataDir: string): Promise<number> {
  return Number(Object.values((await queryWarehouse(dataDir, 'SELECT count(*) FROM loaded_landings')).rows[0]!)[0]);
}

async function expectExactlyOnce(dataDir: string, expected: SampleExpectation) {
  const rows = async (sql: string) => Number(Object.values((await queryWarehouse(dataDir, sql)).rows[0]!)[0]);
  expect(await rows('SELECT count(*) FROM loaded_landings')).toBe(expected.landings);
  expect(await rows('SELECT count(*) FROM items')).toBe(expected.itemIds.size);
  expect(await rows('SELECT count(*) FROM item_metrics')).toBe(expected.metricRows);
  expect(await rows('SELECT sum(credits) FROM api_calls')).toBe(expected.credits);
  expect(await rows('SELECT count(*) FROM search_hits')).toBe(expected.searchHits);
}

describe('a crash loses nothing that was paid for and loads nothing twice', () => {
  it('killed between landing and load: the next load takes every landing', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'crash-'));
    const expected = (await landedSample(emulator, 'run-landed', dataDir)).expected;
    // (The "crash": nothing loaded these landings.) They are on disk, and the next load finds them.
    expect(landedKeys(dataDir)).toHaveLength(expected.landings);
    await loadLandings(dataDir);
    await expectExactlyOnce(dataDir, expected);
  });

  it('killed inside a load transaction, before COMMIT: that batch is rolled back and loaded later, once', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'crash-'));
    const expected = (await landedSample(emulator, 'run-mid', dataDir)).expected;
    expect(await loadAndDie(dataDir, 'beforeCommit')).toBe('SIGKILL');
    // Batch 1 committed; batch 2 was rolled back.
    const committed = await loadedLandings(dataDir);
    expect(committed).toBeGreaterThan(0);
    expect(committed).toBeLessThanOrEqual(3);
    const resumed = await loadLandings(dataDir);
    expect(resumed.landingsLoaded).toBe(expected.landings - committed);
    await expectExactlyOnce(dataDir, expected);
  });

  it('killed after a committed batch: the next load loads the rest, and each landing once', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'crash-'));
    const expected = (await landedSample(emulator, 'run-after', dataDir)).expected;
    expect(await loadAndDie(dataDir, 'afterBatch')).toBe('SIGKILL');
    // Batches 1 and 2 committed (each of at most 3 landings), and no more.
    const committed = await loadedLandings(dataDir);
    expect(committed).toBeGreaterThan(1);
    expect(committed).toBeLessThanOrEqual(6);
    const resumed = await loadLandings(dataDir);
    expect(resumed.landingsLoaded).toBe(expected.landings - committed);
    await expectExactlyOnce(dataDir, expected);
  });
});

describe('a crash between the lake\'s commit and the clearing of the data directory', () => {
  it('killed after the last batch committed, before the run\'s segments were removed: the next load loads nothing again and removes them', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'crash-'));
    const expected = (await landedSample(emulator, 'run-clear', dataDir)).expected;
    expect(await loadAndDie(dataDir, 'beforeClear', 1)).toBe('SIGKILL');
    expect(await loadedLandings(dataDir)).toBe(expected.landings);
    expect(readdirSync(join(dataDir, 'segments'))).toHaveLength(1);
    const resumed = await loadLandings(dataDir);
    expect(resumed.landingsLoaded).toBe(0);
    await expectExactlyOnce(dataDir, expected);
    expect(readdirSync(join(dataDir, 'segments'))).toEqual([]);
  });
});

describe('several processes on one machine', () => {
  it('two loaders started at once both finish, and every landing is loaded exactly once', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'two-loaders-'));
    const first = (await landedSample(emulator, 'run-one', dataDir)).expected;
    const second = (await landedSample(emulator, 'run-two', dataDir)).expected;
    const script = join(dataDir, 'load.mjs');
    writeFileSync(script, `import { loadLandings } from ${JSON.stringify(join(PROJECT_ROOT, 'dist', 'src', 'warehouse', 'loader.js'))};\nawait loadLandings(process.argv[2], { batchLandings: 2 });`);
    const run = () =>
      new Promise<number | null>((resolve) => {
        const child = spawn(process.execPath, [script, dataDir], { stdio: 'inherit' });
        child.once('exit', (code) => resolve(code));
      });
    // The second waits for DuckDB's lock on the work database, then finds nothing left to load.
    expect(await Promise.all([run(), run()])).toEqual([0, 0]);
    const rows = async (sql: string) => Number(Object.values((await queryWarehouse(dataDir, sql)).rows[0]!)[0]);
    expect(await rows('SELECT count(*) FROM loaded_landings')).toBe(first.landings + second.landings);
    expect(await rows('SELECT count(*) FROM item_metrics')).toBe(first.metricRows + second.metricRows);
    expect(await rows('SELECT count(*) FROM api_calls')).toBe(first.apiCalls + second.apiCalls);
  });
});
