/**
 * Latest-state tables (accounts, items, comments) hold one row per natural key however many loads
 * merge into them, also once a data file holds more than DuckDB's 2,048-row vector: a DuckLake
 * MERGE whose source was a CTE with UNION ALL left matched rows at positions 2,048 and above
 * visible beside their new versions (issue "Daily use keeps the data true";
 * docs/ducklake-merge-duplicates.md).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { landingOfCall } from '../../activities/page-landing.js';
import type { CallReport, SocialApiClient } from '../../src/api/client.js';
import { openLakeWriter } from '../../src/warehouse/lake.js';
import { forgetCheckedSchemas, loadLandings } from '../../src/warehouse/loader.js';
import { maintainLake } from '../../src/warehouse/maintenance.js';
import { LATEST_STATE_KEYS } from '../../src/warehouse/merge.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { clientFor } from '../support/client.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { landAnswer } from '../support/landed.js';

let emulator: TestEmulator;
let client: SocialApiClient;
const dataDirs: string[] = [];
beforeAll(async () => {
  emulator = await startTestEmulator();
  client = clientFor(emulator);
});
afterAll(async () => {
  await client.close();
  await emulator.close();
  for (const dataDir of dataDirs) rmSync(dataDir, { recursive: true, force: true });
});

function newDataDir(): string {
  const dataDir = mkdtempSync(join(tmpdir(), 'latest-state-'));
  dataDirs.push(dataDir);
  return dataDir;
}

/** Rows and distinct keys of each latest-state table. */
async function keyCounts(dataDir: string): Promise<Record<string, { rows: number; keys: number }>> {
  const counts: Record<string, { rows: number; keys: number }> = {};
  for (const [table, keys] of Object.entries(LATEST_STATE_KEYS)) {
    const { rows } = await queryWarehouse(dataDir, `SELECT count(*) AS rows, count(DISTINCT (${keys.join(', ')})) AS keys FROM ${table}`);
    counts[table] = { rows: Number(rows[0]!.rows), keys: Number(rows[0]!.keys) };
  }
  return counts;
}

/** A report as if the API had answered `hoursLater` after `report` did. */
const later = (report: CallReport, hoursLater: number): CallReport => ({ ...report, answeredAt: new Date(report.answeredAt.getTime() + hoursLater * 3_600_000) });

describe('latest state past 2,048 rows of a data file', () => {
  it('keeps one row per key when runs re-list channels whose items fill a data file past 2,048 rows', async () => {
    // As the issue measured it: 8 TikTok channels × 400, then runs re-listing 401 and 402 of each.
    const dataDir = newDataDir();
    const handles = (await emulator.catalog()).tiktok.handles.slice(0, 8);
    expect(handles).toHaveLength(8);
    const listed = new Set<string>();
    for (const [run, maxItems] of [400, 401, 402].entries()) {
      for (const handle of handles) {
        let page = 0;
        for await (const result of client.pages('tiktok', 'channel-videos', { handle }, { maxItems, pageSize: 50 })) {
          await landAnswer(dataDir, landingOfCall({ runId: `run-${run}`, harvest: 'daily', target: `channel:tiktok:${handle}:videos`, page: ++page, params: { handle } }, result, result.items));
          for (const item of result.items) listed.add(item.id);
        }
      }
      await loadLandings(dataDir);
    }
    expect(listed.size).toBeGreaterThan(3_200);
    const counts = await keyCounts(dataDir);
    expect(counts.items).toEqual({ rows: listed.size, keys: listed.size });
  }, 240_000);

  it('keeps one row per key in accounts, items and comments through loads that each re-observe most of the rows of a 2,350-row data file', async () => {
    const dataDir = newDataDir();
    const handle = (await emulator.catalog()).tiktok.handles[0]!;
    const profile = await client.get('tiktok', 'channel-stats', { handle });
    const videos = await client.page('tiktok', 'channel-videos', { handle, limit: 50 });
    const video = videos.items[0]!;
    const comments = await client.page('tiktok', 'comments', { url: video.url, limit: 50 });
    expect(comments.items.length).toBeGreaterThan(0);
    const template = { video: videos.items[0]!, comment: comments.items[0]! };

    // Each load observes keys [from, to): the first makes one data file of 2,350 rows per table;
    // the later ones match 1,950 of them (positions below and above 2,048) and add 250, and observe
    // 5 keys twice in the batch (the batch's own grouping).
    const loads: Array<[number, number]> = [
      [0, 2_350],
      [400, 2_600],
      [650, 2_850],
    ];
    for (const [run, [from, to]] of loads.entries()) {
      const runId = `run-${run}`;
      const keys = Array.from({ length: to - from }, (_, index) => from + index);
      const twice = keys.slice(-5);
      for (const [copy, subset] of [keys, twice].entries()) {
        const hours = run * 24 + copy;
        for (let start = 0; start < subset.length; start += 50) {
          const chunk = subset.slice(start, start + 50);
          const page = copy * 1_000 + start / 50 + 1;
          const items = chunk.map((key) => ({ ...template.video, id: `v${key}`, caption: `video ${key} seen in run ${run}, copy ${copy}` }));
          await landAnswer(dataDir, landingOfCall({ runId, harvest: 'synthetic', target: `channel:tiktok:${handle}:videos`, page, params: { handle } }, later(videos, hours), items));
          const replies = chunk.map((key) => ({ ...template.comment, id: `c${key}`, text: `comment ${key} in run ${run}, copy ${copy}` }));
          await landAnswer(dataDir, landingOfCall({ runId, harvest: 'synthetic', target: `item:tiktok:${video.id}:comments`, page, params: { url: video.url } }, later(comments, hours), replies));
        }
        for (const key of subset) {
          const account = { ...(profile.data as object), handle: `account_${key}`, name: `Account ${key} in run ${run}, copy ${copy}` };
          await landAnswer(dataDir, landingOfCall({ runId, harvest: 'synthetic', target: `channel:tiktok:account_${key}:profile`, page: copy + 1, params: { handle: `account_${key}` } }, later(profile, hours), account));
        }
      }
      await loadLandings(dataDir);
    }
    const keysSeen = 2_850;
    expect(await keyCounts(dataDir)).toEqual({
      accounts: { rows: keysSeen, keys: keysSeen },
      items: { rows: keysSeen, keys: keysSeen },
      comments: { rows: keysSeen, keys: keysSeen },
    });
    // The newest observation won for every key, those past 2,048 of the first file included.
    const { rows } = await queryWarehouse(dataDir, "SELECT count(*) AS stale FROM items WHERE item_id IN ('v2100', 'v2300', 'v2599') AND caption NOT LIKE '% run 2, %'");
    expect(Number(rows[0]!.stale)).toBe(0);
    const [newest] = (await queryWarehouse(dataDir, "SELECT caption FROM items WHERE item_id = 'v2849'")).rows;
    expect(newest!.caption).toBe('video 2849 seen in run 2, copy 1');

    // A lake left with duplicates across those positions (as the bug left them) is repaired by maintenance.
    await asLakeWriter(dataDir, "INSERT INTO items SELECT * REPLACE (last_seen_at - INTERVAL 30 DAY AS last_seen_at, 'stale' AS caption) FROM items WHERE CAST(substr(item_id, 2) AS INTEGER) % 4 = 0");
    expect((await keyCounts(dataDir)).items!.rows).toBeGreaterThan(keysSeen);
    const maintained = await maintainLake(dataDir);
    expect(maintained.duplicatesRemoved).toEqual({ accounts: 0, items: Math.ceil(keysSeen / 4), comments: 0 });
    expect((await keyCounts(dataDir)).items).toEqual({ rows: keysSeen, keys: keysSeen });
    const { rows: stale } = await queryWarehouse(dataDir, "SELECT count(*) AS stale FROM items WHERE caption = 'stale'");
    expect(Number(stale[0]!.stale)).toBe(0);
  }, 240_000);
});

describe('one row per key, checked and repaired', () => {
  it('fails a load that would leave two rows for one key, naming the table, and loads nothing of it', async () => {
    const { dataDir, handle, first } = await lakeOfOnePage(1, 'forced');
    // A duplicate forced into the lake behind the loader's back, as the DuckLake bug left them.
    await forceDuplicate(dataDir, first.items[0]!.id);
    await landAnswer(dataDir, landingOfCall({ runId: 'run-1', harvest: 'forced', target: `channel:tiktok:${handle}:videos`, page: 1, params: { handle } }, later(first, 1), first.items));
    const load = loadLandings(dataDir);
    await expect(load).rejects.toThrow(/items.*one row per key.*platform, item_id.*tiktok.*rolled back/s);
    const { rows } = await queryWarehouse(dataDir, "SELECT count(*) AS loaded FROM loaded_landings WHERE run_id = 'run-1'");
    expect(Number(rows[0]!.loaded)).toBe(0);

    // `harvester maintain` repairs it: each key's latest version stays, and the load goes through.
    await maintainLake(dataDir);
    expect((await keyCounts(dataDir)).items).toEqual({ rows: first.items.length, keys: first.items.length });
    const result = await loadLandings(dataDir);
    expect(result.landingsLoaded).toBe(1);
    expect((await keyCounts(dataDir)).items).toEqual({ rows: first.items.length, keys: first.items.length });
  }, 240_000);
});

describe('a lake made before the fix', () => {
  it('is repaired by its first load after the upgrade, keeping each key\'s latest version', async () => {
    const { dataDir, first } = await lakeOfOnePage(2, 'upgrade');
    const itemId = first.items[3]!.id;
    await forceDuplicate(dataDir, itemId);
    // As an earlier version left it: its schema mark is not this version's.
    await asLakeWriter(dataDir, "COMMENT ON TABLE loaded_landings IS 'social-harvester schema 0000000000000000'");
    // The upgrade is a new process of the new version: it has asked no lake its schema yet.
    forgetCheckedSchemas();
    expect((await keyCounts(dataDir)).items).toEqual({ rows: first.items.length + 1, keys: first.items.length });
    // The next load, with nothing new to load, repairs it.
    expect((await loadLandings(dataDir)).landingsLoaded).toBe(0);
    expect((await keyCounts(dataDir)).items).toEqual({ rows: first.items.length, keys: first.items.length });
    const [kept] = (await queryWarehouse(dataDir, `SELECT caption FROM items WHERE item_id = '${itemId}'`)).rows;
    expect(kept!.caption).toBe(first.items[3]!.caption);
  }, 240_000);
});

/** A new lake holding one loaded page of ten videos of the catalog's `channel`th TikTok channel. */
async function lakeOfOnePage(channel: number, harvest: string) {
  const dataDir = newDataDir();
  const handle = (await emulator.catalog()).tiktok.handles[channel]!;
  const first = await client.page('tiktok', 'channel-videos', { handle, limit: 10 });
  await landAnswer(dataDir, landingOfCall({ runId: 'run-0', harvest, target: `channel:tiktok:${handle}:videos`, page: 1, params: { handle } }, first, first.items));
  await loadLandings(dataDir);
  return { dataDir, handle, first };
}

/** Inserts a second, older version of an item's row, as a merge that missed a delete would leave it. */
async function forceDuplicate(dataDir: string, itemId: string): Promise<void> {
  await asLakeWriter(dataDir, `INSERT INTO items SELECT * REPLACE (last_seen_at - INTERVAL 1 DAY AS last_seen_at, 'stale' AS caption) FROM items WHERE platform = 'tiktok' AND item_id = '${itemId}'`);
}

/** Changes the lake behind the loader's back, as its writer. */
async function asLakeWriter(dataDir: string, sql: string): Promise<void> {
  const lake = await openLakeWriter(dataDir, 10_000);
  try {
    await lake.connection.run(sql);
  } finally {
    await lake.close();
  }
}
