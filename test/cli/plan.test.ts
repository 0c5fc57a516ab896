import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseHarvestConfig } from '../../src/config/harvest-config.js';
import { loadPriceTable } from '../../src/config/prices.js';
import { planText } from '../../src/cli/commands/plan.js';
import { planHarvestCost, type CostPlan } from '../../src/harvest/cost-plan.js';
import { runCli } from '../support/cli.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';

/*
 * The numbers below are worked out by hand from config/prices.yaml:
 *   tiktok:    channel-videos 3, stats 3, transcript 8, download 7 (refused by the API: 0), comments 2
 *   instagram: channel-posts 2, reels-search 3, stats 1, transcript 40, download 40, comments 3
 *
 * channel tiktok 120 videos, above job_threshold 100: 1 job, 120 × 3 = 360
 *   stats 120 × 3 = 360; transcript 120 × 8 = 960; download 120 × 0 = 0;
 *   comments 120 items × 10 × 2 = 2400 (120 pages)                           target: 4080
 * channel instagram 60 posts: 2 pages, 60 × 2 = 120
 *   stats 60 × 1 = 60; no transcript (photo posts); download 60 × 40 = 2400;
 *   comments 60 × 10 × 3 = 1800                                              target: 4380
 * search instagram 30 reels: 1 page, 30 × 3 = 90
 *   stats 30; transcript 30 × 40 = 1200; download 1200; comments 30 × 10 × 3 = 900   target: 3420
 * comments of one tiktok video, 75: 2 pages, 75 × 2 = 150                    target: 150
 * worst case 4080 + 4380 + 3420 + 150 = 12030 credits, in 6 list calls and 780 enrichment calls.
 * expected: the same, less the enrichment of the 120 videos the job lists (the workflow enriches
 * only what it pages): 12030 - (360 + 960 + 0 + 2400) = 8310.
 */
const CONFIG = `harvests:
  - name: plan-small
    budget: { credits: 20000 }
    job_threshold: 100
    channels:
      - { platform: tiktok, handle: happy_otter0, content: videos, max_items: 120 }
      - { platform: instagram, handle: bright_fox1, content: posts, max_items: 60 }
    searches:
      - { platform: instagram, query: houseplants, max_results: 30 }
    comments:
      - { url: "https://www.tiktok.com/@happy_otter0/video/7113638575486000660", max_items: 75 }
    enrich: { stats: true, transcript: true, download: true, comments: { max_per_item: 10 } }
`;

const KEYS = {
  tiktok: 'channel:tiktok:happy_otter0:videos',
  posts: 'channel:instagram:bright_fox1:posts',
  reels: 'search:instagram:keyword:houseplants',
  comments: 'comments:tiktok:https://www.tiktok.com/@happy_otter0/video/7113638575486000660',
};

let dir: string;
let configFile: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'plan-'));
  configFile = join(dir, 'harvests.yaml');
  writeFileSync(configFile, CONFIG);
});

type JsonPlan = CostPlan & { config: string; prices: string };

async function planJson(args: string[], env: Record<string, string> = {}): Promise<JsonPlan> {
  const result = await runCli(['plan', 'plan-small', '--config', configFile, '--json', ...args], env);
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return JSON.parse(result.stdout) as JsonPlan;
}

/** Per target: [what, endpoint, calls, items, worst credits, expected credits] of each line. */
function linesOf(plan: CostPlan) {
  return Object.fromEntries(
    plan.targets.map((target) => [
      target.key,
      [target.list, ...target.enrichment].map((line) => [line.what, line.endpoint, line.worst.calls, line.worst.items, line.worst.credits, line.expected.credits]),
    ]),
  );
}

describe('harvester plan', () => {
  it('prints the worst case per target and in total, with a budget that covers it', async () => {
    const plan = await planJson([]);
    expect(plan.harvest).toBe('plan-small');
    expect(linesOf(plan)).toEqual({
      [KEYS.tiktok]: [
        ['list', 'tiktok/channel-videos', 1, 120, 360, 360],
        ['stats', 'tiktok/stats', 120, 120, 360, 360],
        ['transcript', 'tiktok/transcript', 120, 120, 960, 960],
        ['download', 'tiktok/download', 120, 120, 0, 0],
        ['comments', 'tiktok/comments', 120, 1200, 2400, 2400],
      ],
      [KEYS.posts]: [
        ['list', 'instagram/channel-posts', 2, 60, 120, 120],
        ['stats', 'instagram/stats', 60, 60, 60, 60],
        ['download', 'instagram/download', 60, 60, 2400, 2400],
        ['comments', 'instagram/comments', 60, 600, 1800, 1800],
      ],
      [KEYS.reels]: [
        ['list', 'instagram/reels-search', 1, 30, 90, 90],
        ['stats', 'instagram/stats', 30, 30, 30, 30],
        ['transcript', 'instagram/transcript', 30, 30, 1200, 1200],
        ['download', 'instagram/download', 30, 30, 1200, 1200],
        ['comments', 'instagram/comments', 30, 300, 900, 900],
      ],
      [KEYS.comments]: [['list', 'tiktok/comments', 2, 75, 150, 150]],
    });
    expect(plan.targets.map((target) => [target.list.mode, target.worstCredits, target.expectedCredits])).toEqual([
      ['job', 4080, 4080],
      ['pages', 4380, 4380],
      ['pages', 3420, 3420],
      ['pages', 150, 150],
    ]);
    expect(plan.totals).toEqual({ calls: 786, listedItems: 285, worstCredits: 12030, worstCreditsCapped: 12030, expectedCredits: 12030, expectedRange: { low: 6930, high: 12030 } });
    // From the price table every line is what is asked, but comments may be fewer, down to none: 12030 less the 5100 of comments.
    expect(plan.budget).toEqual({ credits: 20000, source: 'harvest', harvestCredits: 20000 });
    expect(plan.budgetCoversWorstCase).toBe(true);
    expect(plan.shortfall).toBe(0);
    expect(plan.assumptions.length).toBeGreaterThan(0);
  });

  it('--budget caps the worst case, and expected shows where the run stops buying', async () => {
    // The job is reserved first (360), leaving 640. The paged targets then buy in config order,
    // an item at a time while its worst case (listing and enrichment) fits: each instagram post is
    // 2 + 1 (stats) + 40 (download) + 30 (10 comments) = 73, so 8 posts take 584, leaving 56; a
    // reel (3 + 1 + 40 + 40 + 30 = 114) does not fit; the comments target (2 each, no enrichment)
    // buys 28 with the 56. Nothing is left for the items the job listed: 1000 spent.
    const plan = await planJson(['--budget', '1000']);
    expect(plan.budget).toEqual({ credits: 1000, source: 'override', harvestCredits: 20000 });
    expect(plan.totals).toEqual({ calls: 786, listedItems: 285, worstCredits: 12030, worstCreditsCapped: 1000, expectedCredits: 1000, expectedRange: { low: 760, high: 1000 } });
    expect(plan.budgetCoversWorstCase).toBe(false);
    expect(plan.shortfall).toBe(11030);
    const posts = plan.targets[1]!;
    expect([posts.list, ...posts.enrichment].map((line) => [line.what, line.expected])).toEqual([
      ['list', { calls: 1, items: 8, credits: 16 }],
      ['stats', { calls: 8, items: 8, credits: 8 }],
      ['download', { calls: 8, items: 8, credits: 320 }],
      ['comments', { calls: 8, items: 80, credits: 240 }],
    ]);
    expect(plan.targets.map((target) => target.expectedCredits)).toEqual([360, 584, 0, 56]);
  });

  it('prints an aligned table, the totals and the budget line', async () => {
    const result = await runCli(['plan', 'plan-small', '--config', configFile, '--budget', '1000']);
    expect(result.code).toBe(0);
    expect(result.stderr).toBe('');
    const lines = result.stdout.split('\n');
    const header = lines.find((line) => line.startsWith('target'))!;
    expect(header).toMatch(/^target\s+endpoint\s+calls\s+items\s+worst credits\s+expected credits$/);
    const row = (key: string) => lines.find((line) => line.startsWith(`${key} `));
    expect(row(KEYS.tiktok)).toMatch(/ tiktok\/channel-videos +1 job +120 +360 +360$/);
    expect(row(KEYS.posts)).toMatch(/ instagram\/channel-posts +2 pages +60 +120 +16$/);
    expect(row(KEYS.comments)).toMatch(/ tiktok\/comments +2 pages +75 +150 +56$/);
    expect(lines).toContainEqual(expect.stringMatching(/^ {2}\+ comments +tiktok\/comments +120 pages +1200 +2400 +0$/));
    expect(lines).toContainEqual(expect.stringMatching(/^ {2}\+ download +instagram\/download +60 calls +60 +2400 +320$/));
    expect(row('total')).toMatch(/ 786 calls +285 +12030 +1000$/);
    // Aligned: every row of the table has the header's width or less, and numbers end in one column.
    const tableRows = lines.slice(lines.indexOf(header), lines.findIndex((line) => line.startsWith('total')) + 1);
    expect(new Set(tableRows.slice(2).map((line) => line.length))).toEqual(new Set([header.length]));
    expect(result.stdout).toContain('worst case: 12030 credits; capped at the budget: 1000');
    expect(result.stdout).toContain('expected:   1000 credits');
    expect(result.stdout).toContain("budget:     1000 credits (--budget; the harvest's own is 20000): does NOT cover the worst case of 12030 (11030 short)");
    expect(result.stdout).toContain('tiktok downloads are refused by the API (download_unavailable) and cost nothing');
    expect(result.stdout).not.toContain('does not enrich');

    const covered = await runCli(['plan', 'plan-small', '--config', configFile]);
    expect(covered.stdout).toContain("budget:     20000 credits (the harvest's): covers the worst case (7970 to spare)");
  });

  it('a config error exits 1 with the loader message (file:line), and an unknown harvest names the known ones', async () => {
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, CONFIG.replace('max_results: 30', 'max_results: 0'));
    const result = await runCli(['plan', 'plan-small', '--config', bad]);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(`harvester: ${bad}:9: harvests[0].searches[0].max_results: expected a whole number from 1 to 100000, got 0\n`);

    const unknown = await runCli(['plan', 'no-such-harvest', '--config', configFile]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain(`${configFile}: harvests: no harvest named "no-such-harvest"; the file has: plan-small`);
  });
});

describe('harvester plan makes no API call', () => {
  let emulator: TestEmulator;
  let counter: Server;
  let requests = 0;
  beforeAll(async () => {
    emulator = await startTestEmulator();
    counter = createServer((request, response) => {
      requests++;
      response.writeHead(500).end();
    });
    await new Promise<void>((resolve) => counter.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    await emulator.close();
    await new Promise((resolve) => counter.close(resolve));
  });

  it('the emulator bills nothing, and no request reaches the API at all', async () => {
    await planJson([], { SOCIAL_API_BASE_URL: emulator.baseUrl, SOCIAL_API_KEY: emulator.apiKey });
    await planJson(['--budget', '50'], { SOCIAL_API_BASE_URL: emulator.baseUrl, SOCIAL_API_KEY: emulator.apiKey });
    expect(await emulator.ledger()).toEqual([]);
    expect(await emulator.ledger(emulator.apiKey)).toEqual([]);

    const { port } = counter.address() as { port: number };
    await planJson([], { SOCIAL_API_BASE_URL: `http://127.0.0.1:${port}/v1`, SOCIAL_API_KEY: 'sk_live_counter' });
    expect(requests).toBe(0);
  });
});

describe('the cost arithmetic', () => {
  const prices = loadPriceTable();
  const harvest = (yaml: string) => parseHarvestConfig(`harvests:\n  - name: h\n${yaml}`, 'h.yaml').harvests[0]!;

  it('forecasts the tracked items due per target, spent last, as far as the budget goes (track.items)', () => {
    const config = parseHarvestConfig(CONFIG.replace('    enrich:', '    track: { accounts: true, items: { days: 7 } }\n    enrich:'), 'tracked.yaml');
    const small = config.harvests.find((entry) => entry.name === 'plan-small')!;
    const tracking = { asOfMs: Date.UTC(2026, 10, 24), due: { [KEYS.tiktok]: 40, [KEYS.reels]: 10 }, credits: 40 * prices['tiktok/stats'] + 10 * prices['instagram/stats'] };
    const plan = planHarvestCost(small, prices, { tracking });
    const withoutItems = planHarvestCost(small, prices);
    expect(plan.targets.map((target) => [target.key, target.tracked?.endpoint ?? null, target.tracked?.worst.calls ?? null, target.tracked?.expected.credits ?? null])).toEqual([
      [KEYS.tiktok, 'tiktok/stats', 40, 40 * prices['tiktok/stats']],
      [KEYS.posts, null, null, null],
      [KEYS.reels, 'instagram/stats', 10, 10 * prices['instagram/stats']],
      [KEYS.comments, null, null, null],
    ]);
    expect(plan.totals.expectedCredits).toBe(withoutItems.totals.expectedCredits + tracking.credits);
    const text = planText(plan, { config: 'tracked.yaml', prices: 'prices.yaml' });
    expect(text).toContain('+ stats again (track.items)');
    expect(text).toContain("the warehouse's tracked items (due at 2026-11-24T00:00:00.000Z)");
    // Spent last: a budget that ends inside tracking observes as many due items as it covers, and no
    // more: 10 TikTok items, and one Instagram item with the credit left.
    const budgetCredits = withoutItems.totals.expectedCredits + 10 * prices['tiktok/stats'] + prices['instagram/stats'];
    const short = planHarvestCost(small, prices, { tracking, budgetCredits });
    expect(short.targets.map((target) => target.tracked?.expected.items ?? 0)).toEqual([10, 0, 1, 0]);
    expect(short.totals.expectedCredits).toBeLessThanOrEqual(budgetCredits);
  });

  it('forecasts one profile per tracked account, spent after everything new (track.accounts)', () => {
    const config = parseHarvestConfig(CONFIG.replace('    enrich:', '    track: { accounts: true }\n    enrich:'), 'tracked.yaml');
    const small = config.harvests.find((entry) => entry.name === 'plan-small')!;
    const tracked = planHarvestCost(small, prices);
    const untracked = planHarvestCost({ ...small, track: { accounts: false } }, prices);
    // One channel per account: the TikTok and the Instagram channel; searches and comment pulls have none.
    expect(tracked.targets.map((target) => [target.key, target.account?.endpoint ?? null, target.account?.worst.credits ?? null])).toEqual([
      [KEYS.tiktok, 'tiktok/channel-stats', prices['tiktok/channel-stats']],
      [KEYS.posts, 'instagram/channel-stats', prices['instagram/channel-stats']],
      [KEYS.reels, null, null],
      [KEYS.comments, null, null],
    ]);
    const profiles = prices['tiktok/channel-stats'] + prices['instagram/channel-stats'];
    expect(tracked.totals.worstCredits).toBe(untracked.totals.worstCredits + profiles);
    expect(tracked.totals.expectedCredits).toBe(untracked.totals.expectedCredits + profiles);
    // Spent last: with a short budget, tracking takes nothing the new items would have had.
    const budgetCredits = Math.floor(untracked.totals.expectedCredits / 2);
    const short = planHarvestCost(small, prices, { budgetCredits });
    const shortUntracked = planHarvestCost({ ...small, track: { accounts: false } }, prices, { budgetCredits });
    const withoutAccounts = (plan: CostPlan) => plan.targets.map((target) => [target.list, ...target.enrichment].map((line) => line.expected.credits));
    expect(withoutAccounts(short)).toEqual(withoutAccounts(shortUntracked));
    expect(short.totals.expectedCredits).toBeLessThanOrEqual(budgetCredits);
  });

  it('a job returns at most 10000 items, and a list at the threshold is paged', () => {
    const plan = planHarvestCost(
      harvest(`    budget: { credits: 1000000 }
    job_threshold: 500
    channels:
      - { platform: tiktok, handle: a, content: videos, max_items: 25000 }
      - { platform: tiktok, handle: b, content: videos, max_items: 500 }
`),
      prices,
    );
    expect(plan.targets.map((target) => [target.list.mode, target.list.worst])).toEqual([
      ['job', { calls: 1, items: 10000, credits: 30000 }],
      ['pages', { calls: 10, items: 500, credits: 1500 }],
    ]);
    expect(plan.targets[0]!.list.note).toMatch(/at most 10000 items/);
    expect(plan.targets[0]!.enrichment).toEqual([]);
  });

  it('jobs are reserved before pages are bought, and a job the budget keeps to 50 items is paged', () => {
    const config = (credits: number) => `    budget: { credits: ${credits} }
    job_threshold: 100
    channels:
      - { platform: tiktok, handle: a, content: videos, max_items: 60 }
      - { platform: tiktok, handle: b, content: videos, max_items: 120 }
`;
    // 400: the job takes 120 × 3 = 360 first; the pages then get 40 / 3 = 13 videos (39).
    const first = planHarvestCost(harvest(config(400)), prices);
    expect(first.targets.map((target) => [target.list.mode, target.list.worst.credits, target.list.expected])).toEqual([
      ['pages', 180, { calls: 1, items: 13, credits: 39 }],
      ['job', 360, { calls: 1, items: 120, credits: 360 }],
    ]);
    // 100: the job would get 33 videos, too few for a job: it is paged after the other target,
    // which takes 33 of them (99), leaving nothing.
    const second = planHarvestCost(harvest(config(100)), prices);
    expect(second.targets.map((target) => target.list.expected)).toEqual([
      { calls: 1, items: 33, credits: 99 },
      { calls: 0, items: 0, credits: 0 },
    ]);
  });

  it('comments targets are not enriched; summary skips photo posts but not reels', () => {
    const plan = planHarvestCost(
      harvest(`    budget: { credits: 100000 }
    channels:
      - { platform: instagram, handle: a, content: posts, max_items: 10 }
      - { platform: instagram, handle: a, content: reels, max_items: 10 }
    comments:
      - { url: "https://www.instagram.com/reel/ABC123/", max_items: 10 }
    enrich: { summary: true, comments: true }
`),
      prices,
    );
    expect(plan.targets.map((target) => target.enrichment.map((line) => [line.what, line.worst.credits]))).toEqual([
      [['comments', 10 * 20 * 3]],
      [
        ['summary', 10 * 42],
        ['comments', 10 * 20 * 3],
      ],
      [],
    ]);
  });

  it('a budget smaller than one item buys nothing', () => {
    const plan = planHarvestCost(harvest(`    budget: { credits: 2 }\n    channels:\n      - { platform: tiktok, handle: a, content: videos, max_items: 5 }\n`), prices);
    expect(plan.totals).toMatchObject({ worstCredits: 15, worstCreditsCapped: 2, expectedCredits: 0 });
    expect(plan.targets[0]!.list.expected).toEqual({ calls: 0, items: 0, credits: 0 });
  });
});
