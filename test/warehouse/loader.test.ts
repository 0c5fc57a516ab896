import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeLanding, listLandings, readLanding } from '../../src/warehouse/landing.js';
import { loadLandings } from '../../src/warehouse/loader.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { clientFor } from '../support/client.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { landSampleHarvest, type SampleExpectation } from '../support/sample-harvest.js';

let emulator: TestEmulator;
beforeAll(async () => {
  emulator = await startTestEmulator();
});
afterAll(() => emulator.close());

async function count(dataDir: string, sql: string): Promise<number> {
  const result = await queryWarehouse(dataDir, sql);
  return Number(Object.values(result.rows[0]!)[0]);
}

describe('loading landings into the warehouse', () => {
  let dataDir: string;
  let expected: SampleExpectation;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'warehouse-'));
    const client = clientFor(emulator);
    expected = await landSampleHarvest(client, emulator, dataDir, 'run-1');
    await client.close();
  });

  it('loads every landing once, into the documented tables', async () => {
    const result = await loadLandings(dataDir);
    expect(result.landingsLoaded).toBe(expected.landings);
    expect(result.published).toBe(true);
    expect(await count(dataDir, 'SELECT count(*) FROM items')).toBe(expected.itemIds.size);
    expect(await count(dataDir, 'SELECT count(*) FROM item_metrics')).toBe(expected.metricRows);
    expect(await count(dataDir, 'SELECT count(*) FROM api_calls')).toBe(expected.apiCalls);
    expect(await count(dataDir, 'SELECT sum(credits) FROM api_calls')).toBe(expected.credits);
    expect(await count(dataDir, 'SELECT count(*) FROM search_hits')).toBe(expected.searchHits);
    expect(await count(dataDir, 'SELECT count(*) FROM comments')).toBe(expected.comments);
    expect(await count(dataDir, 'SELECT count(*) FROM accounts')).toBe(1);
    expect(await count(dataDir, 'SELECT count(*) FROM account_metrics')).toBe(1);
    expect(await count(dataDir, 'SELECT count(*) FROM transcripts')).toBe(1);
    expect(await count(dataDir, 'SELECT count(*) FROM transcript_segments')).toBeGreaterThan(0);
    expect(await count(dataDir, 'SELECT count(*) FROM summaries')).toBe(1);
    expect(await count(dataDir, 'SELECT count(*) FROM downloads')).toBe(1);
    expect(await count(dataDir, "SELECT count(*) FROM harvest_runs WHERE status = 'completed'")).toBe(1);
    expect(await count(dataDir, 'SELECT count(*) FROM loaded_landings')).toBe(expected.landings);
    // Search ranks run 1..50 across both pages of the listing.
    expect(await count(dataDir, 'SELECT max(rank) FROM search_hits')).toBe(50);
    // Every call is traceable to the credits the emulator's ledger charged for it.
    const ledger = await emulator.ledger();
    const calls = await queryWarehouse(dataDir, 'SELECT request_id, credits FROM api_calls');
    for (const call of calls.rows) expect(ledger.find((row) => row.request_id === call.request_id)?.credits).toBe(Number(call.credits));
  });

  it('loading again loads nothing and changes nothing', async () => {
    const again = await loadLandings(dataDir);
    expect(again.landingsLoaded).toBe(0);
    expect(await count(dataDir, 'SELECT count(*) FROM item_metrics')).toBe(expected.metricRows);
  });

  it('a retried landing write replaces its file and is never loaded twice', async () => {
    const key = listLandings(dataDir).find((name) => name.includes('page-000001') && name.includes('videos'))!;
    const landing = readLanding(dataDir, key);
    expect(writeLanding(dataDir, landing)).toBe(key);
    expect(listLandings(dataDir).length).toBe(expected.landings);
    expect((await loadLandings(dataDir)).landingsLoaded).toBe(0);
    expect(await count(dataDir, 'SELECT count(*) FROM item_metrics')).toBe(expected.metricRows);
  });
});

describe('re-harvesting keeps history without duplicating items', () => {
  it('items are upserted, metrics appended, and growth between observations is visible', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'warehouse-'));
    const client = clientFor(emulator);
    const first = await landSampleHarvest(client, emulator, dataDir, 'run-a');
    await loadLandings(dataDir);
    await emulator.admin('clock', { advance_seconds: 2 * 86_400 });
    const second = await landSampleHarvest(client, emulator, dataDir, 'run-b', { fresh: true });
    await client.close();
    await loadLandings(dataDir);
    const union = new Set([...first.itemIds, ...second.itemIds]);
    expect(await count(dataDir, 'SELECT count(*) FROM items')).toBe(union.size);
    expect(await count(dataDir, 'SELECT count(DISTINCT (platform, item_id)) FROM items')).toBe(union.size);
    expect(await count(dataDir, 'SELECT count(*) FROM item_metrics')).toBe(first.metricRows + second.metricRows);
    // An item seen in both runs: two observations, first_seen_at from run a, last_seen_at from run b.
    const both = [...first.itemIds].find((id) => second.itemIds.has(id))!;
    const item = (await queryWarehouse(dataDir, `SELECT first_seen_at < last_seen_at AS later FROM items WHERE item_id = '${both}'`)).rows[0]!;
    expect(item.later).toBe(true);
    const growth = await queryWarehouse(dataDir, `SELECT views_delta, hours_since_previous FROM item_growth WHERE item_id = '${both}' AND views_delta IS NOT NULL`);
    expect(growth.rows.length).toBeGreaterThanOrEqual(1);
    expect(Number(growth.rows[0]!.views_delta)).toBeGreaterThanOrEqual(0);
    const latest = await queryWarehouse(dataDir, `SELECT run_id FROM latest_item_metrics WHERE item_id = '${both}'`);
    expect(latest.rows).toEqual([{ run_id: 'run-b' }]);
    const top = await queryWarehouse(dataDir, 'SELECT count(*) AS n FROM top_items_per_account WHERE rank_in_account = 1');
    expect(Number(top.rows[0]!.n)).toBeGreaterThan(0);
    expect(await count(dataDir, 'SELECT count(*) FROM harvest_runs')).toBe(2);
    expect(await count(dataDir, 'SELECT count(*) FROM accounts')).toBe(1);
    expect(await count(dataDir, 'SELECT count(*) FROM account_metrics')).toBe(2);
  });
});
