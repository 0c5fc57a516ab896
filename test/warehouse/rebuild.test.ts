import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadLandings } from '../../src/warehouse/loader.js';
import { ensureSchema } from '../../src/warehouse/schema-version.js';
import { openLakeWriter } from '../../src/warehouse/lake.js';
import { maintainLake } from '../../src/warehouse/maintenance.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { rebuildLake } from '../../src/warehouse/rebuild.js';
import { STAGED_TABLES } from '../../src/warehouse/schema.js';
import { clientFor } from '../support/client.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { landSampleHarvest } from '../support/sample-harvest.js';

let emulator: TestEmulator;
beforeAll(async () => {
  emulator = await startTestEmulator();
});
afterAll(() => emulator.close());

/** Every row of every table the loads make, in a fixed order, as text. */
async function tablesOf(dataDir: string): Promise<Record<string, string[]>> {
  const tables: Record<string, string[]> = {};
  for (const table of STAGED_TABLES) {
    const result = await queryWarehouse(dataDir, `SELECT * FROM ${table}`);
    tables[table] = result.rows.map((row) => JSON.stringify(row)).sort();
  }
  return tables;
}

describe('harvester rebuild', () => {
  it('derives the tables from the raw answers again, row for row as the loads made them, with the answers gone from the data directory', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'rebuild-'));
    const client = clientFor(emulator);
    try {
      // Two runs, loaded in several batches each, the second re-observing what the first saw.
      await landSampleHarvest(client, emulator, dataDir, 'run-r1', { fresh: true });
      await loadLandings(dataDir, { batchLandings: 4 });
      await emulator.admin('clock', { advance_seconds: 86_400 });
      await landSampleHarvest(client, emulator, dataDir, 'run-r2', { fresh: true });
      await loadLandings(dataDir, { batchLandings: 5 });
    } finally {
      await client.close();
    }
    // Both runs are over and loaded: their answers are only in the lake now.
    expect(readdirSync(join(dataDir, 'segments'))).toEqual([]);
    const loaded = await tablesOf(dataDir);
    expect(loaded.items!.length).toBeGreaterThan(50);
    const result = await rebuildLake(dataDir, { batchAnswers: 7 });
    expect(result.answers).toBe(26);
    expect(await tablesOf(dataDir)).toEqual(loaded);
  }, 120_000);

  it('fills a column added after the answers were loaded: the lake of a version without items.request_id, upgraded, then rebuilt', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'rebuild-column-'));
    const client = clientFor(emulator);
    try {
      await landSampleHarvest(client, emulator, dataDir, 'run-c1', { fresh: true });
    } finally {
      await client.close();
    }
    await loadLandings(dataDir);
    const requestIds = async () => (await queryWarehouse(dataDir, 'SELECT item_id, request_id FROM items ORDER BY ALL')).rows.map((row) => JSON.stringify(row));
    const loaded = await requestIds();
    expect(loaded.length).toBeGreaterThan(10);
    expect(loaded.every((row) => /"request_id":"[^"]+"/.test(row))).toBe(true);
    // The lake as the version before the column left it: no items.request_id, and its schema mark.
    const lake = await openLakeWriter(dataDir, 10_000);
    try {
      await lake.connection.run('ALTER TABLE items DROP COLUMN request_id');
      await lake.connection.run("COMMENT ON TABLE loaded_landings IS 'an earlier version'");
    } finally {
      await lake.close();
    }
    // The upgrade adds the column; the rows loaded before it have none.
    const upgraded = await openLakeWriter(dataDir, 10_000);
    try {
      expect(await ensureSchema(upgraded.connection)).toBe(true);
    } finally {
      await upgraded.close();
    }
    expect((await requestIds()).every((row) => row.includes('"request_id":null'))).toBe(true);
    // A rebuild fills it from the answers already paid for, as the loads had.
    await rebuildLake(dataDir);
    expect(await requestIds()).toEqual(loaded);
  }, 120_000);

  it('keeps every raw answer by default; maintain --keep-raw-days expires those loaded before, and nothing else', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'raw-expiry-'));
    const client = clientFor(emulator);
    try {
      await landSampleHarvest(client, emulator, dataDir, 'run-x1');
    } finally {
      await client.close();
    }
    await loadLandings(dataDir);
    const rows = async (table: string) => Number(Object.values((await queryWarehouse(dataDir, `SELECT count(*) FROM ${table}`)).rows[0]!)[0]);
    const [answers, items] = [await rows('raw_answers'), await rows('items')];
    expect(answers).toBe(13);
    expect((await maintainLake(dataDir)).rawAnswersExpired).toBe(0);
    expect(await rows('raw_answers')).toBe(answers);
    expect((await maintainLake(dataDir, { keepRawAnswersDays: 1 })).rawAnswersExpired).toBe(0);
    expect((await maintainLake(dataDir, { keepRawAnswersDays: 0 })).rawAnswersExpired).toBe(answers);
    expect(await rows('raw_answers')).toBe(0);
    expect(await rows('items')).toBe(items);
  }, 120_000);
});
