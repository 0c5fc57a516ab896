import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AnswerSegments, landingText, type PageLanding } from '../../src/store/landing.js';
import { quarantinedLandingsOfRun, requeueQuarantinedLandings } from '../../src/store/quarantine.js';
import { pageLandingKey, quarantineFile } from '../../src/store/layout.js';
import { repairString, repairValue } from '../../src/store/text-repair.js';
import { loadLandings } from '../../src/warehouse/loader.js';
import { queryWarehouse } from '../../src/warehouse/query.js';

/** A lone surrogate and a NUL, as JavaScript's JSON parser gives them from `\ud800` and `\u0000`. */
const BAD = 'a\u0000b\ud800c';
const REPAIRED = 'a\uFFFDb\uFFFDc';

function statsLanding(runId: string, itemId: string, authorName: string): PageLanding {
  const url = `https://www.tiktok.com/@cook/video/${itemId}`;
  return {
    format: 1,
    kind: 'page',
    run_id: runId,
    harvest: 'repairs',
    target: `stats:tiktok:${itemId}`,
    page: 1,
    endpoint: 'tiktok/stats',
    params: { url },
    request_id: `req_${itemId}`,
    observed_at: '2026-11-20T10:00:00Z',
    call: { request_id: `req_${itemId}`, units: 1, credits: 1 },
    data: { platform: 'tiktok', entity_id: itemId, url, author: { handle: 'cook', name: authorName }, posted_at: '2026-11-01T00:00:00Z', metrics: { views: 10, likes: 2, comments: 1, shares: 0 } },
  };
}

function listLanding(runId: string, caption: string): PageLanding {
  const item = (id: string, text: string) => ({ id, url: `https://www.tiktok.com/@cook/video/${id}`, caption: text, posted_at: '2026-11-01T00:00:00Z', metrics: { views: 5, likes: 1, comments: 0 } });
  return {
    format: 1,
    kind: 'page',
    run_id: runId,
    harvest: 'repairs',
    target: 'channel:tiktok:cook:videos',
    page: 1,
    endpoint: 'tiktok/channel-videos',
    params: { handle: 'cook' },
    request_id: 'req_list1',
    observed_at: '2026-11-20T10:00:00Z',
    call: { request_id: 'req_list1', units: 2, credits: 2 },
    data: [item('7001', 'fine'), item('7002', caption)],
  };
}

/** A landing's text as versions before the repair wrote it: JSON.stringify, lone surrogates escaped as `\ud800`. */
function unrepairedText(landing: PageLanding): string {
  const { data, ...rest } = landing;
  return JSON.stringify({ ...rest, data });
}

describe('text that is not well-formed Unicode', () => {
  it('is repaired string by string: lone surrogates and NUL become U+FFFD, pairs and other text are kept', () => {
    expect(repairString(BAD)).toEqual({ text: REPAIRED, replaced: ['U+0000', 'U+D800'] });
    expect(repairString('emoji 😀, lone low \udc01, tab\t')).toEqual({ text: 'emoji 😀, lone low \uFFFD, tab\t', replaced: ['U+DC01'] });
    expect(repairString('plain')).toEqual({ text: 'plain', replaced: [] });
    const repairs: { path: string; replaced: string[] }[] = [];
    expect(repairValue({ data: [{ caption: 'ok' }, { caption: BAD, tags: ['\ud800'] }] }, '', repairs)).toEqual({ data: [{ caption: 'ok' }, { caption: REPAIRED, tags: ['\uFFFD'] }] });
    expect(repairs).toEqual([
      { path: '.data[1].caption', replaced: ['U+0000', 'U+D800'] },
      { path: '.data[1].tags[0]', replaced: ['U+D800'] },
    ]);
  });

  it('is landed repaired, with its repairs recorded, and loads: every item and its stats are in the lake, the repairs in text_repairs', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'text-repair-'));
    const segments = AnswerSegments.of(dataDir);
    await segments.land(listLanding('run-repair', BAD));
    await segments.land(statsLanding('run-repair', '7002', BAD));
    await segments.syncRun('run-repair');
    // The segment, the durable copy, holds well-formed text: the escapes DuckDB refuses are gone.
    const landed = (await segments.text(pageLandingKey('run-repair', 'channel:tiktok:cook:videos', 1)))!;
    expect(landed).not.toMatch(/\\u(0000|d800)/);
    expect(JSON.parse(landed)).toMatchObject({ repairs: [{ path: 'data[1].caption', replaced: ['U+0000', 'U+D800'] }] });

    const result = await loadLandings(dataDir);
    await segments.close();
    expect(result.quarantined).toEqual([]);
    expect(result.landingsLoaded).toBe(2);
    const items = (await queryWarehouse(dataDir, 'SELECT item_id, caption FROM items ORDER BY item_id')).rows;
    expect(items).toEqual([
      { item_id: '7001', caption: 'fine' },
      { item_id: '7002', caption: REPAIRED },
    ]);
    expect((await queryWarehouse(dataDir, "SELECT item_id FROM item_metrics WHERE source_endpoint = 'tiktok/stats'")).rows).toEqual([{ item_id: '7002' }]);
    const repairs = (await queryWarehouse(dataDir, 'SELECT endpoint, request_id, field_path, replaced FROM text_repairs ORDER BY endpoint')).rows;
    expect(repairs).toEqual([
      { endpoint: 'tiktok/channel-videos', request_id: 'req_list1', field_path: 'data[1].caption', replaced: ['U+0000', 'U+D800'] },
      { endpoint: 'tiktok/stats', request_id: 'req_7002', field_path: 'data.author.name', replaced: ['U+0000', 'U+D800'] },
    ]);
    // The raw answer keeps the repaired text and its record, for a rebuild.
    expect((await queryWarehouse(dataDir, "SELECT count(*)::INTEGER AS answers FROM raw_answers WHERE (answer->'repairs') IS NOT NULL")).rows).toEqual([{ answers: 2 }]);
  });

  it('landed unrepaired by an earlier version, in a landing file or put back from quarantine, it loads repaired', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'text-repair-old-'));
    const list = listLanding('run-old', BAD);
    const stats = statsLanding('run-old', '7002', BAD);
    // A landing file of an earlier version, with the escapes DuckDB refuses.
    const listKey = pageLandingKey('run-old', list.target, 1);
    const listFile = join(dataDir, 'landing', ...listKey.split('/'));
    mkdirSync(dirname(listFile), { recursive: true });
    writeFileSync(listFile, unrepairedText(list));
    expect(readFileSync(listFile, 'utf8')).toContain('\\ud800');
    // A stats answer an earlier version's load set aside: its copy in quarantine/ with DuckDB's reason.
    const statsKey = pageLandingKey('run-old', stats.target, 1);
    const quarantined = quarantineFile(dataDir, statsKey);
    mkdirSync(dirname(quarantined), { recursive: true });
    writeFileSync(quarantined, unrepairedText(stats));
    writeFileSync(`${quarantined}.reason`, 'Invalid Input Error: Malformed JSON: no low surrogate in string\n');
    expect(quarantinedLandingsOfRun(dataDir, 'run-old')).toHaveLength(1);

    expect(requeueQuarantinedLandings(dataDir, 'run-old')).toBe(1);
    expect(existsSync(quarantined)).toBe(false);
    expect(existsSync(`${quarantined}.reason`)).toBe(false);
    const result = await loadLandings(dataDir);
    expect(result.quarantined).toEqual([]);
    expect(result.landingsLoaded).toBe(2);
    expect(quarantinedLandingsOfRun(dataDir, 'run-old')).toEqual([]);
    expect((await queryWarehouse(dataDir, "SELECT caption FROM items WHERE item_id = '7002'")).rows).toEqual([{ caption: REPAIRED }]);
    expect((await queryWarehouse(dataDir, "SELECT count(*)::INTEGER AS rows FROM item_metrics WHERE source_endpoint = 'tiktok/stats'")).rows).toEqual([{ rows: 1 }]);
    expect((await queryWarehouse(dataDir, 'SELECT field_path FROM text_repairs ORDER BY field_path')).rows).toEqual([{ field_path: 'data.author.name' }, { field_path: 'data[1].caption' }]);
  });

  it('a landing with nothing to repair is written as before, byte for byte', () => {
    const landing = listLanding('run-plain', 'a caption with \\u escapes in words, a tab\t and 😀');
    expect(landingText(landing)).toBe(unrepairedText(landing));
  });
});
