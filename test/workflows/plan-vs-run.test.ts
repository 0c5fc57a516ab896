/**
 * The plan forecasts what the run spends, as a property: random harvests (channels and searches
 * on both platforms, paged or as jobs, every enrichment, tracked accounts, budgets from a few
 * credits to more than the worst case) are each planned (`harvester plan`'s planHarvestCost) and
 * run (the harvest workflow on a real worker, against the emulator). Where the API holds at least
 * the items each target asks for, the run's credits and items equal the plan's forecast; where
 * it holds fewer, the run lands fewer and spends less than forecast, never more.
 *
 * Fast enough for CI by keeping each harvest small (at most two pages a target) and running
 * several at once on one worker; a worker serves a batch of harvests whose targets are all
 * different, since a target listed completely before makes the next run incremental, which a plan
 * (a first run's) does not forecast. The suite runs a smoke of 20 harvests of the fixed seed (its
 * draws hold budgets that bite and ample ones, so every assertion below still has something to
 * check); the full property, 200 harvests, is a benchmark: `npm run bench:plan`
 * (bench/plan-vs-run.mjs). PLAN_PROPERTY_HARVESTS and PLAN_PROPERTY_SEED reproduce a run, and
 * PLAN_PROPERTY_REPORT names a file the property test writes its tally to, as one JSON line.
 */
import { appendFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ListEndpoint } from '../../src/api/client.js';
import { planHarvestCost, type CostPlan } from '../../src/harvest/cost-plan.js';
import type { Harvest } from '../../src/harvest/harvest-types.js';
import { planTargets, type TargetPlan } from '../../src/harvest/targets.js';
import { randomStream } from '../../src/emulator/world/random.js';
import { World } from '../../src/emulator/world/world.js';
import { TOPICS } from '../../src/emulator/world/vocabulary.js';
import { startHarvestRig, type HarvestRig } from '../support/harvest-rig.js';
import { executeHarvest, harvestFrom, prices, startTestWorker } from '../support/temporal.js';

const HARVESTS = Number(process.env.PLAN_PROPERTY_HARVESTS ?? 20);
const SEED = Number(process.env.PLAN_PROPERTY_SEED ?? 20261126);
if (!Number.isInteger(HARVESTS) || HARVESTS < 1) throw new Error(`PLAN_PROPERTY_HARVESTS must be a whole number, 1 or more; it is ${process.env.PLAN_PROPERTY_HARVESTS}`);
if (!Number.isInteger(SEED)) throw new Error(`PLAN_PROPERTY_SEED must be a whole number; it is ${process.env.PLAN_PROPERTY_SEED}`);
/** Harvests per worker (one data directory), and run at once. */
const BATCH = 25;
const AT_ONCE = 5;
const EMULATOR_SEED = 7;
const HARVEST_KEY = 'sk_live_plan_property';
const VERIFY_KEY = 'sk_live_plan_property_verify';

let rig: HarvestRig;
let world: World;

beforeAll(async () => {
  rig = await startHarvestRig({ harvest: HARVEST_KEY, verify: VERIFY_KEY }, { seed: EMULATOR_SEED, credits: 1_000_000_000, jobStepMs: 20 });
  // The emulator's world, rebuilt from its seed: handles of accounts beyond the catalog's dozen.
  world = new World(EMULATOR_SEED, Date.now());
});
afterAll(async () => {
  await rig?.close();
});

interface Draw {
  int(low: number, high: number): number;
  pick<T>(items: readonly T[]): T;
  chance(p: number): boolean;
}

function draws(random: () => number): Draw {
  const int = (low: number, high: number) => low + Math.floor(random() * (high - low + 1));
  return { int, pick: (items) => items[int(0, items.length - 1)]!, chance: (p) => random() < p };
}

/** A random harvest's YAML, its targets none of `used`. */
function randomHarvest(draw: Draw, name: string, used: Set<string>): string {
  const channels: string[] = [];
  const searches: string[] = [];
  const targets = draw.int(1, 3);
  while (channels.length + searches.length < targets) {
    const platform = draw.pick(['tiktok', 'instagram'] as const);
    const maxItems = draw.pick([1, 3, 8, 20, 35, 50, 60, 75, 90]);
    if (draw.chance(0.6)) {
      const content = platform === 'tiktok' ? 'videos' : draw.pick(['posts', 'reels']);
      const handle = world.account(platform, draw.int(12, 4_999)).handle;
      if (used.has(`${platform}:${handle}:${content}`)) continue;
      used.add(`${platform}:${handle}:${content}`);
      channels.push(`      - { platform: ${platform}, handle: ${handle}, content: ${content}, max_items: ${maxItems} }`);
    } else {
      const topic = draw.pick(TOPICS);
      const hashtag = platform === 'tiktok' && draw.chance(0.3);
      const key = `${platform}:${hashtag ? '#' : ''}${topic}`;
      if (used.has(key)) continue;
      used.add(key);
      searches.push(`      - { platform: ${platform}, ${hashtag ? `hashtag: ${topic.replace(/\s+/g, '')}` : `query: "${topic}"`}, max_results: ${maxItems} }`);
    }
  }
  const comments = draw.chance(0.25) ? `{ max_per_item: ${draw.pick([1, 5, 20, 60])} }` : 'false';
  const enrich = draw.chance(0.2)
    ? '{ stats: false, transcript: false, download: false, summary: false, comments: false }'
    : `{ stats: ${draw.chance(0.6)}, transcript: ${draw.chance(0.4)}, download: ${draw.chance(0.3)}, summary: ${draw.chance(0.2)}, comments: ${comments} }`;
  return `
harvests:
  - name: ${name}
    budget: { credits: 1 }
    job_threshold: ${draw.pick([60, 500, 500])}
    concurrency: { targets: ${draw.int(1, 4)}, calls: ${draw.int(1, 8)} }
    enrich: ${enrich}
    ${draw.chance(0.3) && channels.length > 0 ? 'track: { accounts: true }' : ''}
${channels.length > 0 ? `    channels:\n${channels.join('\n')}` : ''}
${searches.length > 0 ? `    searches:\n${searches.join('\n')}` : ''}
`;
}

/** A budget from a few credits to more than the worst case. */
function randomBudget(draw: Draw, worst: number): number {
  const share = draw.pick([0.02, 0.1, 0.25, 0.5, 0.8, 1, 1.5]);
  return Math.max(1, Math.round(worst * share * (0.8 + 0.4 * draw.int(0, 100) / 100)));
}

/**
 * Whether the API holds at least what a target asks for: its list to max_items, and for comments
 * enrichment max_per_item comments on each of those items, read with the verification key.
 */
async function holds(target: TargetPlan, commentsPerItem: number): Promise<boolean> {
  const urls: string[] = [];
  for await (const page of rig.verify.pages(target.platform, target.endpoint as ListEndpoint, target.params, { maxItems: target.maxItems })) urls.push(...page.items.map((item) => (item as { url: string }).url));
  if (urls.length < target.maxItems) return false;
  if (commentsPerItem === 0) return true;
  for (const url of urls) {
    let comments = 0;
    for await (const page of rig.verify.pages(target.platform, 'comments', { url }, { maxItems: commentsPerItem })) comments += page.items.length;
    if (comments < commentsPerItem) return false;
  }
  return true;
}

interface Outcome {
  name: string;
  yaml: string;
  budget: number;
  /** The plan's worst case fits the budget: the budget does not bite. */
  ample: boolean;
  plan: { credits: number; items: number };
  run: { credits: number; items: number; status: string };
  apiHoldsAll: boolean;
}

async function runOne(taskQueue: string, name: string, yaml: string, budget: number): Promise<Outcome> {
  const harvest: Harvest = { ...harvestFrom(yaml), budget: { credits: budget } };
  const plan: CostPlan = planHarvestCost(harvest, prices);
  const summary = await executeHarvest(rig.temporal, { taskQueue, workflowId: `${name}-${Date.now()}`, input: { harvest } });
  const perItem = harvest.enrich.comments ? harvest.enrich.comments.max_per_item : 0;
  const apiHoldsAll = (await Promise.all(planTargets(harvest).map((target) => holds(target, target.enrich ? perItem : 0)))).every(Boolean);
  return {
    name,
    yaml,
    budget,
    ample: plan.budgetCoversWorstCase,
    plan: { credits: plan.totals.expectedCredits, items: plan.targets.reduce((sum, target) => sum + target.list.expected.items, 0) },
    run: { credits: summary.creditsSpent, items: summary.itemsLanded, status: summary.status },
    apiHoldsAll,
  };
}

/**
 * The property. Where the API holds all that is asked, the run is the forecast. Where it holds
 * less (a shorter list, fewer comments), an ample budget buys less than forecast, never more; a
 * budget that bites is spent on what the API does hold, so what one target did not cost may buy
 * another more items than forecast: then only the budget bounds the run.
 */
function asForecast(outcome: Outcome): boolean {
  const { plan, run } = outcome;
  if (run.credits > outcome.budget) return false;
  if (outcome.apiHoldsAll) return run.credits === plan.credits && run.items === plan.items;
  return !outcome.ample || (run.credits <= plan.credits && run.items <= plan.items);
}

/** The property test's outcome in numbers, for the benchmark's line (bench/plan-vs-run.mjs). */
function tally(outcomes: Outcome[], wrong: number) {
  const statuses: Record<string, number> = {};
  for (const outcome of outcomes) statuses[outcome.run.status] = (statuses[outcome.run.status] ?? 0) + 1;
  const count = (test: (outcome: Outcome) => boolean) => outcomes.filter(test).length;
  return { seed: SEED, harvests: outcomes.length, wrong, apiHoldsAll: count((outcome) => outcome.apiHoldsAll), ample: count((outcome) => outcome.ample), statuses, credits: outcomes.reduce((sum, outcome) => sum + outcome.run.credits, 0), items: outcomes.reduce((sum, outcome) => sum + outcome.run.items, 0) };
}

it(`${HARVESTS} random harvests spend and land what the plan forecast (less, never more, where the API holds less)`, { tags: ['long'], timeout: (2 + HARVESTS / 5) * 60_000 }, async () => {
  // The emulator's seeded stream (mulberry32), so a failing draw can be run again.
  const draw = draws(randomStream(SEED));
  const outcomes: Outcome[] = [];
  for (let first = 0; first < HARVESTS; first += BATCH) {
    const worker = await startTestWorker(rig.api);
    try {
      const used = new Set<string>();
      const batch = Array.from({ length: Math.min(BATCH, HARVESTS - first) }, (_, index) => {
        const name = `property-${first + index}`;
        const yaml = randomHarvest(draw, name, used);
        const worst = planHarvestCost(harvestFrom(yaml), prices).totals.worstCredits;
        return { name, yaml, budget: randomBudget(draw, worst) };
      });
      for (let start = 0; start < batch.length; start += AT_ONCE) {
        outcomes.push(...(await Promise.all(batch.slice(start, start + AT_ONCE).map(({ name, yaml, budget }) => runOne(worker.taskQueue, name, yaml, budget)))));
      }
    } finally {
      await worker.stop();
    }
  }
  const wrong = outcomes.filter((outcome) => !asForecast(outcome));
  if (process.env.PLAN_PROPERTY_REPORT) appendFileSync(process.env.PLAN_PROPERTY_REPORT, `${JSON.stringify(tally(outcomes, wrong.length))}\n`);
  const describe = (outcome: Outcome) =>
    `${outcome.name} (budget ${outcome.budget}${outcome.ample ? ', ample' : ''}, API holds ${outcome.apiHoldsAll ? 'all' : 'less'}): plan ${outcome.plan.credits} credits / ${outcome.plan.items} items, run ${outcome.run.credits} / ${outcome.run.items} (${outcome.run.status})${outcome.yaml}`;
  expect(wrong.map(describe), `seed ${SEED}`).toEqual([]);
  // The draw covers both sides of the property, and budgets that bite as well as ample ones.
  expect(outcomes).toHaveLength(HARVESTS);
  expect(outcomes.some((outcome) => outcome.run.status === 'budget_exhausted')).toBe(true);
  expect(outcomes.some((outcome) => outcome.run.status === 'completed')).toBe(true);
  // A ceiling, not a bound on time: 200 harvests took about 20 minutes on two busy cores.
});

it('an Instagram channel and two searches with transcripts, at budgets from short to ample: the run is the forecast where the API holds what is asked', async () => {
  const worker = await startTestWorker(rig.api);
  try {
    const { handles, queries } = rig.catalog.instagram;
    const outcomes: Outcome[] = [];
    for (const [index, budget] of [400, 3_400, 20_000].entries()) {
      // A data directory of its own per run would make them first runs; distinct targets do the same.
      const yaml = `
harvests:
  - name: instagram-${index}
    budget: { credits: 1 }
    enrich: { transcript: true }
    channels:
      - { platform: instagram, handle: ${handles[index]}, content: reels, max_items: 50 }
    searches:
      - { platform: instagram, query: "${queries[(2 * index) % queries.length]}", max_results: 60 }
      - { platform: instagram, query: "${queries[(2 * index + 1) % queries.length]}", max_results: 60 }
`;
      outcomes.push(await runOne(worker.taskQueue, `instagram-${index}`, yaml, budget));
    }
    const describe = (outcome: Outcome) => `${outcome.name} (budget ${outcome.budget}, API holds ${outcome.apiHoldsAll ? 'all' : 'less'}): plan ${outcome.plan.credits} / ${outcome.plan.items}, run ${outcome.run.credits} / ${outcome.run.items}`;
    expect(outcomes.filter((outcome) => !asForecast(outcome)).map(describe)).toEqual([]);
  } finally {
    await worker.stop();
  }
}, 10 * 60_000);
