import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Landing, PageLanding } from '../../src/store/landing.js';
import { legacyLandingKeys, writeLegacyLanding } from '../support/legacy-landing.js';
import { LocalStore } from '../../src/store/store.js';
import { closeDatabase, openDatabase } from '../../src/warehouse/duckdb.js';
import { openLake } from '../../src/warehouse/lake.js';
import { loadLandings, type QuarantinedLanding } from '../../src/warehouse/loader.js';
import { WAREHOUSE_TABLES } from '../../src/warehouse/schema.js';
import { legacyWarehouseFiles, pageLandingKey } from '../../src/store/layout.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { clientFor } from '../support/client.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { landedSample, landSampleHarvest, type SampleExpectation } from '../support/sample-harvest.js';
import { landAnswer, landedAnswers } from '../support/landed.js';
import { landingOfCall } from '../../activities/page-landing.js';

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

  let landings: Map<string, Landing>;

  beforeAll(async () => {
    ({ dataDir, expected } = await landedSample(emulator, 'run-1'));
    landings = landedAnswers(dataDir);
  });

  it('loads every landing once, into the documented tables', async () => {
    const result = await loadLandings(dataDir);
    expect(result.landingsLoaded).toBe(expected.landings);
    // Each batch is one snapshot of the lake, after the one that made its tables.
    expect(result.snapshot).toBeGreaterThan(result.batches);
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

  it('maps each field of the API resources to its column', async () => {
    // The video with stats was also listed in the same batch: its caption comes from the list
    // (stats carry none), its metrics from both, and its first and last sighting span both.
    const [video] = (await queryWarehouse(dataDir, "SELECT item_id FROM item_metrics WHERE source_endpoint = 'tiktok/stats'")).rows;
    const item = (await queryWarehouse(dataDir, `SELECT kind, url, caption, author_handle, posted_at IS NOT NULL AS posted FROM items WHERE item_id = '${String(video!.item_id)}'`)).rows[0]!;
    expect(item.kind).toBe('video');
    expect(String(item.url)).toContain(`/video/${String(video!.item_id)}`);
    expect(item.caption).toEqual(expect.any(String));
    expect(item.author_handle).toEqual(expect.any(String));
    expect(item.posted).toBe(true);
    expect(await count(dataDir, `SELECT count(*) FROM item_metrics WHERE item_id = '${String(video!.item_id)}' AND views IS NOT NULL`)).toBe(2);
    expect(await count(dataDir, `SELECT count(*) FROM comments WHERE item_id <> '${String(video!.item_id)}' OR text IS NULL OR author_handle IS NULL`)).toBe(0);
    expect(await count(dataDir, "SELECT count(*) FROM items WHERE platform = 'instagram' AND kind <> 'reel'")).toBe(0);
    expect(await count(dataDir, 'SELECT count(*) FROM accounts WHERE followers IS NULL OR name IS NULL OR verified IS NULL')).toBe(0);
    expect(await count(dataDir, 'SELECT min(seq) FROM transcript_segments')).toBe(0);
    expect(await count(dataDir, 'SELECT max(seq) + 1 - count(*) FROM transcript_segments')).toBe(0);
    expect(await count(dataDir, 'SELECT count(*) FROM transcripts WHERE text IS NULL OR language IS NULL')).toBe(0);
    expect(await count(dataDir, 'SELECT count(*) FROM summaries WHERE summary IS NULL')).toBe(0);
    expect(await count(dataDir, "SELECT count(*) FROM downloads WHERE platform = 'instagram' AND media_url IS NOT NULL AND expires_at IS NOT NULL")).toBe(1);
    expect(await count(dataDir, "SELECT count(*) FROM api_calls WHERE endpoint = 'tiktok/channel-videos' AND (params->>'handle') IS NULL")).toBe(0);
    expect(await count(dataDir, "SELECT count(*) FROM search_hits WHERE query <> 'yoga' OR kind <> 'search'")).toBe(0);
    // Every landing records the rows it contributed, and together they are every row loaded.
    expect(await count(dataDir, 'SELECT count(*) FROM loaded_landings WHERE rows = 0')).toBe(0);
  });

  it('loading again loads nothing and changes nothing', async () => {
    const again = await loadLandings(dataDir);
    expect(again.landingsLoaded).toBe(0);
    expect(await count(dataDir, 'SELECT count(*) FROM item_metrics')).toBe(expected.metricRows);
  });

  it('clears the answers of a run that is over once they are in the lake: nothing of it stays outside the lake', () => {
    expect(existsSync(join(dataDir, 'segments'))).toBe(true);
    expect(readdirSync(join(dataDir, 'segments'))).toEqual([]);
  });

  it('a landing written again (by a second attempt) is never loaded twice, and is cleared', async () => {
    const [key, landing] = [...landings].find(([name]) => name.includes('page-000001') && name.includes('videos'))!;
    expect(await new LocalStore(dataDir).writeLanding(landing)).toBe(key);
    expect((await loadLandings(dataDir)).landingsLoaded).toBe(0);
    expect(await count(dataDir, 'SELECT count(*) FROM item_metrics')).toBe(expected.metricRows);
    expect(readdirSync(join(dataDir, 'segments'))).toEqual([]);
  });
});

describe('landings the loader cannot load', () => {
  let dataDir: string;
  let expected: SampleExpectation;

  let landings: Map<string, Landing>;
  /** A landing of the sample, by a part of its key. */
  const sampleLanding = (part: string) => [...landings].find(([key]) => key.includes(part))!;

  beforeAll(async () => {
    ({ dataDir, expected } = await landedSample(emulator, 'run-bad'));
    landings = landedAnswers(dataDir);
  });

  async function loadedCount(): Promise<bigint> {
    return BigInt(await count(dataDir, 'SELECT count(*) FROM loaded_landings'));
  }

  /** A landing file written byte for byte, as no harvest would. */
  function writeRaw(key: string, text: string) {
    const file = join(dataDir, 'landing', ...key.split('/'));
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, text);
  }

  function expectQuarantined(entry: QuarantinedLanding, key: string, reason: RegExp) {
    expect(entry.key).toBe(key);
    expect(entry.reason).toMatch(reason);
    expect(entry.file).toBe(join(dataDir, 'quarantine', ...key.split('/')));
    expect(existsSync(entry.file)).toBe(true);
    expect(readFileSync(`${entry.file}.reason`, 'utf8')).toMatch(reason);
    expect(legacyLandingKeys(dataDir)).not.toContain(key);
  }

  it('a landing that is not JSON is quarantined with its reason, and every other landing still loads', async () => {
    const key = 'run-bad/broken/page-000001.json';
    writeRaw(key, '{"format":1,"kind":"page","data":[');
    const result = await loadLandings(dataDir);
    expect(result.landingsLoaded).toBe(expected.landings);
    expect(result.quarantined).toHaveLength(1);
    expectQuarantined(result.quarantined[0]!, key, /not JSON/);
    expect(await count(dataDir, 'SELECT count(*) FROM item_metrics')).toBe(expected.metricRows);
    // Nothing is loaded twice by the next load, and the quarantined file is not met again.
    const again = await loadLandings(dataDir);
    expect(again).toMatchObject({ landingsLoaded: 0, quarantined: [] });
    expect(await loadedCount()).toBe(BigInt(expected.landings));
  });

  it('a page of an endpoint with no normalizer, or without a content URL, is quarantined naming why; the good page beside it loads', async () => {
    const source = sampleLanding('stats')[1] as PageLanding;
    const unknown = writeLegacyLanding(dataDir, { ...source, run_id: 'run-bad-endpoint', endpoint: 'tiktok/unknown-endpoint' as PageLanding['endpoint'] });
    const badUrl = writeLegacyLanding(dataDir, { ...source, run_id: 'run-bad-url', params: { url: 'https://example.com/not-a-video' } });
    const good = writeLegacyLanding(dataDir, { ...source, run_id: 'run-good' });
    const result = await loadLandings(dataDir);
    expect(result.landingsLoaded).toBe(1);
    expect(result.quarantined.map((entry) => entry.key).sort()).toEqual([badUrl, unknown].sort());
    expectQuarantined(result.quarantined.find((entry) => entry.key === unknown)!, unknown, /tiktok\/unknown-endpoint.*no normalizer|no normalizer.*tiktok\/unknown-endpoint/);
    expectQuarantined(result.quarantined.find((entry) => entry.key === badUrl)!, badUrl, /params\.url "https:\/\/example\.com\/not-a-video" is not a tiktok content URL/);
    expect(legacyLandingKeys(dataDir)).toContain(good);
    expect(await loadedCount()).toBe(BigInt(expected.landings + 1));
  });

  it('several landings DuckDB cannot read, in the batch of good ones, are each found and quarantined with DuckDB\'s reason; the rest load once', async () => {
    const source = sampleLanding('videos')[1] as PageLanding;
    const items = source.data as Record<string, unknown>[];
    // Valid JSON, but values that do not fit their columns: only DuckDB's read finds these.
    const badViews = writeLegacyLanding(dataDir, { ...source, run_id: 'run-bad-views', data: items.map((item, index) => (index === 1 ? { ...item, metrics: { views: 'many' } } : item)) });
    const badLikes = writeLegacyLanding(dataDir, { ...source, run_id: 'run-bad-likes', data: items.map((item, index) => (index === 0 ? { ...item, metrics: { likes: 'lots' } } : item)) });
    // Valid JSON over several lines: a package holds a landing per line, so it is set aside before DuckDB reads.
    const multiline = pageLandingKey('run-pretty', source.target, 1);
    writeRaw(multiline, JSON.stringify({ ...source, run_id: 'run-pretty' }, null, 2));
    // An editor's trailing newline is no fault.
    const trailing = pageLandingKey('run-trailing', source.target, 1);
    writeRaw(trailing, `${JSON.stringify({ ...source, run_id: 'run-trailing' })}\n`);
    const good = writeLegacyLanding(dataDir, { ...source, run_id: 'run-good-2' });
    const loadedBefore = await loadedCount();
    const metricsBefore = await count(dataDir, 'SELECT count(*) FROM item_metrics');

    const result = await loadLandings(dataDir);
    expect(result.quarantined.map((entry) => entry.key).sort()).toEqual([badLikes, badViews, multiline].sort());
    expectQuarantined(result.quarantined.find((entry) => entry.key === badViews)!, badViews, /Failed to cast value to numerical: "many"/);
    expectQuarantined(result.quarantined.find((entry) => entry.key === badLikes)!, badLikes, /Failed to cast value to numerical: "lots"/);
    expectQuarantined(result.quarantined.find((entry) => entry.key === multiline)!, multiline, /spans several lines/);
    // DuckDB's reason names neither the package file nor its line: the user has the landing's name.
    for (const entry of result.quarantined) expect(entry.reason).not.toMatch(/\n|\.loader|jsonl|in line/);
    expect(result.landingsLoaded).toBe(2);
    expect(await loadedCount()).toBe(loadedBefore + 2n);
    expect(await count(dataDir, `SELECT count(*) FROM loaded_landings WHERE landing IN ('${good}', '${trailing}') AND rows = ${2 * items.length + 1}`)).toBe(2);
    expect(await count(dataDir, 'SELECT count(*) FROM item_metrics')).toBe(metricsBefore + 2 * items.length);

    const again = await loadLandings(dataDir);
    expect(again).toMatchObject({ landingsLoaded: 0, quarantined: [] });
    expect(await loadedCount()).toBe(loadedBefore + 2n);
    expect(await count(dataDir, 'SELECT count(*) FROM item_metrics')).toBe(metricsBefore + 2 * items.length);
  });

  it('a landing written with its data first still loads: landingText puts data last', async () => {
    const [key, landing] = sampleLanding('videos');
    const { data, ...rest } = landing as PageLanding;
    const reordered = { data, ...rest } as PageLanding;
    writeLegacyLanding(dataDir, { ...reordered, run_id: 'run-reordered' });
    const text = readFileSync(join(dataDir, 'landing', ...key.replace('run-bad', 'run-reordered').split('/')), 'utf8');
    expect(text.endsWith(`"data":${JSON.stringify(data)}}`)).toBe(true);
    const result = await loadLandings(dataDir);
    expect(result.landingsLoaded).toBe(1);
    expect(result.rowsLoaded).toBe(2 * (data as unknown[]).length + 1);
  });
});

describe('re-harvesting keeps history without duplicating items', () => {
  it('items are upserted, metrics appended, and growth between observations is visible', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'warehouse-'));
    const client = clientFor(emulator);
    // Fresh answers: growth is measured between observations whose counts are of their time.
    const first = await landSampleHarvest(client, emulator, dataDir, 'run-a', { fresh: true });
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

describe('rows an analyst can trust: the call behind each row, and no views where there are none', () => {
  it("gives latest-state rows their latest call's request id, keeps older warehouses' rows, and gives photo posts null views from stats as from their list", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'quality-'));
    // A warehouse made before the lake, and before items, comments and accounts carried a request
    // id, with one item in it: the loader's work database of that version.
    const legacy = legacyWarehouseFiles(dataDir);
    mkdirSync(dirname(legacy.work), { recursive: true });
    const old = await openDatabase(legacy.work);
    await old.connection.run(`CREATE TABLE items (platform VARCHAR NOT NULL, item_id VARCHAR NOT NULL, kind VARCHAR NOT NULL, url VARCHAR, caption VARCHAR,
      author_handle VARCHAR, posted_at TIMESTAMPTZ, first_seen_at TIMESTAMPTZ NOT NULL, last_seen_at TIMESTAMPTZ NOT NULL)`);
    await old.connection.run(`INSERT INTO items VALUES ('tiktok', 'older-item', 'video', NULL, 'kept', NULL, NULL, now(), now())`);
    closeDatabase(old);

    const client = clientFor(emulator);
    const catalog = await emulator.catalog();
    const handle = catalog.instagram.handles[0]!;
    const land = (target: string, params: Record<string, string>, result: Parameters<typeof landingOfCall>[1], data: unknown) =>
      landAnswer(dataDir, landingOfCall({ runId: 'run-quality', harvest: 'quality', target, page: 1, params }, result, data));
    try {
      const posts = await client.page('instagram', 'channel-posts', { handle, limit: 5 });
      await land(`channel:instagram:${handle}:posts`, { handle }, posts, posts.items);
      const photo = posts.items[0]!;
      expect(photo.url).toContain('instagram.com/p/');
      // The API's clock (its Date header) counts whole seconds: the stats call comes a second later.
      await emulator.admin('clock', { advance_seconds: 1 });
      const stats = await client.get('instagram', 'stats', { url: photo.url });
      expect((stats.data as { metrics: { views: number } }).metrics.views).toBe(0);
      await land(`item:instagram:${photo.id}:stats`, { url: photo.url }, stats, stats.data);
      const comments = await client.page('instagram', 'comments', { url: photo.url, limit: 5 });
      await land(`item:instagram:${photo.id}:comments`, { url: photo.url }, comments, comments.items);
      const profile = await client.get('instagram', 'channel-stats', { handle });
      await land(`channel:instagram:${handle}:profile`, { handle }, profile, profile.data);

      await loadLandings(dataDir);
      const views = await queryWarehouse(dataDir, `SELECT source_endpoint, views, likes FROM item_metrics WHERE item_id = '${photo.id}' ORDER BY source_endpoint`);
      expect(views.rows.map((row) => [row.source_endpoint, row.views])).toEqual([
        ['instagram/channel-posts', null],
        ['instagram/stats', null],
      ]);
      expect(views.rows.every((row) => row.likes !== null)).toBe(true);

      // The photo was last seen by its stats call, after its list.
      const item = await queryWarehouse(dataDir, `SELECT request_id FROM items WHERE item_id = '${photo.id}'`);
      expect(item.rows[0]!.request_id).toBe(stats.requestId);
      const listed = await queryWarehouse(dataDir, `SELECT DISTINCT request_id FROM items WHERE item_id <> '${photo.id}' AND item_id <> 'older-item'`);
      expect(listed.rows.map((row) => row.request_id)).toEqual([posts.requestId]);
      const commentCalls = await queryWarehouse(dataDir, 'SELECT DISTINCT request_id FROM comments');
      expect(commentCalls.rows.map((row) => row.request_id)).toEqual([comments.requestId]);
      const account = await queryWarehouse(dataDir, 'SELECT request_id FROM accounts');
      expect(account.rows.map((row) => row.request_id)).toEqual([profile.requestId]);
      // The older warehouse's row is kept, with no call to name.
      const older = await queryWarehouse(dataDir, "SELECT caption, request_id FROM items WHERE item_id = 'older-item'");
      expect(older.rows).toEqual([{ caption: 'kept', request_id: null }]);
      // Moved into the lake once: the old file is kept aside, and a second load moves nothing again.
      expect(existsSync(legacy.work)).toBe(false);
      expect(existsSync(`${legacy.work}.migrated`)).toBe(true);
      await loadLandings(dataDir);
      expect(await count(dataDir, "SELECT count(*) FROM items WHERE item_id = 'older-item'")).toBe(1);
    } finally {
      await client.close();
    }
  });
});

describe('enrichment coverage from what runs recorded', () => {
  it('tells refused from budget and not asked, and a retry that makes the failed call again clears its refusal', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'coverage-'));
    const client = clientFor(emulator);
    try {
      const handle = (await emulator.catalog()).tiktok.handles[0]!;
      const page = await client.page('tiktok', 'channel-videos', { handle, limit: 3 });
      await landAnswer(dataDir, landingOfCall({ runId: 'run-c', harvest: 'c', target: `channel:tiktok:${handle}:videos`, page: 1, params: { handle } }, page, page.items));
      const [refused, bought] = page.items;
      const stats = await client.get('tiktok', 'stats', { url: bought!.url });
      await landAnswer(dataDir, landingOfCall({ runId: 'run-c', harvest: 'c', target: `item:tiktok:stats:${bought!.url}`, page: 1, params: { url: bought!.url } }, stats, stats.data));
      const status = (seq: number, failed: { endpoint: string; subject: string; reason: string; at: string }[]) =>
        landAnswer(dataDir, { format: 1, kind: 'run', run_id: 'run-c', harvest: 'c', seq, status: 'completed_with_errors', started_at: '2026-01-01T00:00:00Z', enrichments: ['stats', 'comments'], failed_calls: failed });
      await status(2, [{ endpoint: 'tiktok/stats', subject: refused!.url, reason: 'NotFoundError: no TikTok video', at: '2026-01-01T00:01:00Z' }]);
      await loadLandings(dataDir);
      const whyNot = async () =>
        Object.fromEntries(
          ((await queryWarehouse(dataDir, `SELECT item_id, enrichment, coalesce(why_not, 'bought') AS why FROM enrichment_coverage ORDER BY ALL`)).rows as { item_id: string; enrichment: string; why: string }[]).map((row) => [`${row.item_id}/${row.enrichment}`, row.why]),
        );
      const first = await whyNot();
      expect(first[`${refused!.id}/stats`]).toBe('refused');
      expect(first[`${bought!.id}/stats`]).toBe('bought');
      expect(first[`${page.items[2]!.id}/stats`]).toBe('budget');
      expect(first[`${bought!.id}/comments`]).toBe('budget');
      expect(first[`${bought!.id}/transcript`]).toBe('not asked');
      expect(await count(dataDir, `SELECT count(*) FROM failed_calls WHERE run_id = 'run-c'`)).toBe(1);

      // The retry's final status lists no failed call: the refusal is gone.
      await status(3, []);
      await loadLandings(dataDir);
      expect(await count(dataDir, `SELECT count(*) FROM failed_calls WHERE run_id = 'run-c'`)).toBe(0);
      expect((await whyNot())[`${refused!.id}/stats`]).toBe('budget');
    } finally {
      await client.close();
    }
  });
});

describe('an upgrade from the warehouse as one DuckDB file', () => {
  it('moves its history into the lake once, loads only the landings it lacked, and a move cut short before the rename is not done twice', async () => {
    // A warehouse of the version before the lake: the same tables in one DuckDB file, as only the
    // published warehouse.duckdb (the loader's work database is gone), holding run-legacy's landings.
    const { dataDir: source, expected: legacy } = await landedSample(emulator, 'run-legacy');
    const legacyLandings = landedAnswers(source);
    await loadLandings(source);
    const dataDir = mkdtempSync(join(tmpdir(), 'upgrade-'));
    const files = legacyWarehouseFiles(dataDir);
    const lake = await openLake(source, 'read');
    try {
      await lake.connection.run(`ATTACH '${files.published}' AS old`);
      for (const table of WAREHOUSE_TABLES) await lake.connection.run(`CREATE TABLE old.${table} AS SELECT * FROM lake.${table}`);
      await lake.connection.run('DETACH old');
    } finally {
      await lake.close();
    }
    // Its landings as that version left them: a file each.
    for (const landing of legacyLandings.values()) writeLegacyLanding(dataDir, landing);
    // And a run landed since the upgrade.
    const { expected: later } = await landedSample(emulator, 'run-later', dataDir);

    const upgraded = await loadLandings(dataDir);
    // run-legacy's landings were loaded before: the lake knows them from the old loaded_landings.
    expect(upgraded.landingsLoaded).toBe(later.landings);
    expect(existsSync(files.published)).toBe(false);
    expect(existsSync(`${files.published}.migrated`)).toBe(true);
    const loaded = await count(dataDir, 'SELECT count(*) FROM loaded_landings');
    const observations = await count(dataDir, 'SELECT count(*) FROM item_metrics');
    expect(loaded).toBe(legacy.landings + later.landings);
    expect(observations).toBe(legacy.metricRows + later.metricRows);
    expect(await count(dataDir, "SELECT count(*) FROM harvest_runs WHERE run_id = 'run-legacy'")).toBe(1);
    // Both runs are over and in the lake: the landing files of the old layout are cleared, and the segments too.
    expect(readdirSync(join(dataDir, 'landing'))).toEqual([]);
    expect(readdirSync(join(dataDir, 'segments'))).toEqual([]);

    // The move committed, and the worker died before the rename: the old file is still there.
    cpSync(`${files.published}.migrated`, files.published);
    const again = await loadLandings(dataDir);
    expect(again.landingsLoaded).toBe(0);
    expect(await count(dataDir, 'SELECT count(*) FROM loaded_landings')).toBe(loaded);
    expect(await count(dataDir, 'SELECT count(*) FROM item_metrics')).toBe(observations);
    expect(existsSync(files.published)).toBe(false);
  }, 120_000);
});
