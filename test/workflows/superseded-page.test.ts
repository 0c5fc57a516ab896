/**
 * A page landed twice, by two attempts of one work (issue 32, found by the chaos soak, seed 32 run
 * 18): a worker frozen (SIGSTOP) with a page's call in flight lost its work to a new attempt, whose
 * grant (less the frozen call's open worst case) bought only 10 items at that page's cursor; the
 * frozen attempt, running again, landed its 20-item answer at the same key, superseding the short
 * one. The next work resumed from the short page's position (50 items), but read the page back as
 * the store held it (60 items): it listed items 51-60 again (all seen) and then 61-70, past the
 * target's max_items, and landed and enriched them.
 *
 * The state that race leaves is made here with real answers of the emulator (read with another
 * key), and the target's work runs on it as the workflow would start it (the real store, the real
 * emulator over HTTP; Temporal's activity context mocked).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MockActivityEnvironment } from '@temporalio/testing';
import { targetWorkActivities, type TargetWorkResult } from '../../activities/target-work.js';
import { landingOfCall } from '../../activities/page-landing.js';
import type { SocialApiClient } from '../../src/api/client.js';
import { pageLandingKey } from '../../src/store/layout.js';
import { LocalStore } from '../../src/store/store.js';
import { landedAnswers } from '../support/landed.js';
import { clientFor, prices } from '../support/client.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';

const HARVEST_KEY = 'sk_live_superseded_page';
const VERIFY_KEY = 'sk_live_superseded_page_verify';

let emulator: TestEmulator;
let verify: SocialApiClient;
let api: SocialApiClient;
const dirs: string[] = [];
beforeAll(async () => {
  emulator = await startTestEmulator({ apiKeys: [HARVEST_KEY, VERIFY_KEY] });
  verify = clientFor(emulator, { apiKey: VERIFY_KEY });
  api = clientFor(emulator, { apiKey: HARVEST_KEY });
});
afterAll(async () => {
  await verify.close();
  await api.close();
  await emulator.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('a page landed twice by two attempts of a work, the later landing the longer answer', () => {
  it('the next work counts the items the store holds: it lands nothing past max_items, and buys nothing again', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'superseded-page-'));
    dirs.push(dataDir);
    const store = new LocalStore(dataDir);
    const handle = (await emulator.catalog()).tiktok.handles[3]!;
    const runId = `run-superseded-${Date.now().toString(36)}`;
    const target = { key: `channel:tiktok:${handle}:videos`, kind: 'channel' as const, platform: 'tiktok' as const, endpoint: 'channel-videos' as const, params: { handle }, maxItems: 60, enrich: false };
    const land = async (page: number, offset: number, limit: number, cursor: string | undefined) => {
      const result = await verify.page('tiktok', 'channel-videos', { handle, limit, cursor });
      const place = { runId, harvest: 'superseded', target: target.key, page, params: target.params, rankOffset: offset, nextCursor: result.nextCursor, hasMore: result.hasMore };
      await store.writeLanding(landingOfCall(place, result, result.items));
      return result;
    };
    const first = await land(1, 0, 20, undefined);
    const second = await land(2, 20, 20, first.nextCursor);
    // The new attempt's page 3: 10 items, its grant less the frozen call's worst case.
    const short = await land(3, 40, 10, second.nextCursor);
    // The frozen attempt's answer at the same cursor, landed after it: 20 items.
    await land(3, 40, 20, second.nextCursor);
    const firstSixty = new Set<string>();
    for await (const page of verify.pages('tiktok', 'channel-videos', { handle }, { maxItems: 60 })) for (const item of page.items) firstSixty.add(item.id);
    expect(firstSixty.size).toBe(60);

    // The next work, from the position the short page left: 50 items, page 4, its cursor.
    const activities = targetWorkActivities({ client: api, store });
    const from = { page: 4, cursor: short.nextCursor, items: 50, offset: 50, relists: 0 };
    const result: TargetWorkResult = await new MockActivityEnvironment({ attempt: 1 }).run(activities.harvestTarget, {
      runId,
      harvest: 'superseded',
      target,
      workId: 'w5:resumed',
      grant: 1_000,
      prices,
      enrich: { stats: false, comments: false as const, transcript: false, summary: false, download: false },
      pageSize: 20,
      calls: 2,
      from,
      stopAtIds: [],
    });

    const landedIds = new Set<string>();
    for (const landing of landedAnswers(dataDir).values()) if (landing.kind === 'page') for (const item of landing.data as { id: string }[]) landedIds.add(item.id);
    const pastMax = [...landedIds].filter((id) => !firstSixty.has(id));
    expect(pastMax).toEqual([]);
    // The store already held all 60: nothing is bought again, and the work says it has them.
    expect(await emulator.ledger(HARVEST_KEY)).toEqual([]);
    expect(result).toMatchObject({ status: 'done', ended: 'max_items', credits: 0 });
    expect(result.position.items).toBe(60);
    expect(await store.findLanding(pageLandingKey(runId, target.key, 4))).toBeUndefined();
    await store.close();
  }, 30_000);
});
