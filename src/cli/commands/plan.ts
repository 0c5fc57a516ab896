import { Command } from 'commander';
import { DEFAULT_HARVESTS_FILE, findHarvest, loadHarvestConfig } from '../../config/harvest-config.js';
import { DEFAULT_PRICES_FILE, loadPriceTable } from '../../config/prices.js';
import { isoTime, wholeNumber } from '../options.js';
import { planTargets } from '../../harvest/targets.js';
import { PAGE_LIMITS } from '../../api-catalog/endpoints.js';
import { textTable } from '../text-table.js';
import { linesOf, planHarvestCost, type CostPlan, type PlanLine } from '../../harvest/cost-plan.js';
import { dataDirFromEnv } from '../../config/environment.js';
import type { Harvest } from '../../harvest/harvest-types.js';
import type { PlanHistory } from '../../harvest/plan-history.js';

const ENRICHMENT_LABEL: Record<PlanLine['what'], string> = {
  list: 'list',
  stats: '+ stats',
  transcript: '+ transcript',
  summary: '+ summary',
  download: '+ download',
  comments: '+ comments',
  account: '+ profile (track.accounts)',
  tracked: '+ stats again (track.items)',
};

function count(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

function callsCell(line: PlanLine): string {
  if (line.mode === 'job') return count(line.worst.calls, 'job');
  if (line.mode === 'pages') return count(line.worst.calls, 'page');
  return count(line.worst.calls, 'call');
}

export function planText(plan: CostPlan, sources: { config: string; prices: string }): string {
  const rows: string[][] = [];
  for (const target of plan.targets) {
    const { list } = target;
    rows.push([target.key, list.endpoint, callsCell(list), String(list.worst.items), String(list.worst.credits), String(list.expected.credits)]);
    for (const line of linesOf(target).slice(1)) {
      rows.push([`  ${ENRICHMENT_LABEL[line.what]}`, line.endpoint, callsCell(line), String(line.worst.items), String(line.worst.credits), String(line.expected.credits)]);
    }
  }
  const totals = plan.totals;
  const table = textTable(
    ['target', 'endpoint', 'calls', 'items', 'worst credits', 'expected credits'],
    [...rows, ['total', '', count(totals.calls, 'call'), String(totals.listedItems), String(totals.worstCredits), String(totals.expectedCredits)]],
    { rightAligned: [false, false, true, true, true, true] },
  );

  const budget = plan.budget;
  const budgetSource = budget.source === 'override' ? `--budget; the harvest's own is ${budget.harvestCredits}` : "the harvest's";
  const verdict = plan.budgetCoversWorstCase
    ? `covers the worst case (${budget.credits - totals.worstCredits} to spare)`
    : `does NOT cover the worst case of ${totals.worstCredits} (${plan.shortfall} short): the run stops buying when it is spent; the expected column shows where`;
  const notes = plan.targets.flatMap((target) => [
    ...(target.note ? [`${target.key}: ${target.note}`] : []),
    ...[target.list, ...target.enrichment].flatMap((line) => (line.note ? [`${target.key}, ${line.what} (${line.endpoint}): ${line.note}`] : [])),
  ]);
  return [
    `plan for harvest ${plan.harvest} (config ${sources.config}, prices ${sources.prices})`,
    '',
    table,
    '',
    `worst case: ${totals.worstCredits} credits; capped at the budget: ${totals.worstCreditsCapped}`,
    `expected:   ${totals.expectedCredits} credits (range ${totals.expectedRange.low} to ${totals.expectedRange.high})`,
    `budget:     ${budget.credits} credits (${budgetSource}): ${verdict}`,
    '',
    'items: listed items per target; for enrichment, items enriched (comments: comments bought)',
    ...historyText(plan),
    ...(notes.length > 0 ? ['notes:', ...notes.map((note) => `  - ${note}`)] : []),
    'assumptions:',
    ...plan.assumptions.map((assumption) => `  - ${assumption}`),
    plan.tracking
      ? `No API call was made: this is arithmetic on the config, the price table and the warehouse's tracked items (due at ${new Date(plan.tracking.asOfMs).toISOString()}).`
      : 'No API call was made: this is arithmetic on the config and the price table.',
  ].join('\n');
}

/** Which lines the lake's history made, from how many observations: none when every line is the price table's. */
function historyText(plan: CostPlan): string[] {
  const lines = plan.targets.flatMap((target) =>
    linesOf(target).flatMap((line) => (line.basis.source === 'history' ? [`  - ${target.key}, ${ENRICHMENT_LABEL[line.what]}: ${line.basis.detail} (${line.basis.observations} observations; ${line.range.low} to ${line.range.high} credits)`] : [])),
  );
  if (plan.historyAsOfMs === undefined || lines.length === 0) return ['expected from the price table and the config alone: the lake has no history of these targets'];
  return [`expected from the lake's history (planned at ${new Date(plan.historyAsOfMs).toISOString()}), where it has some, else from the price table:`, ...lines];
}

/**
 * What earlier runs observed of the harvest's targets: none without a lake. Which targets' last
 * listing was complete is the store's (its listing coverage), as the run's prepareRun reads it.
 */
export async function planHistory(harvest: Harvest, asOfMs: number): Promise<PlanHistory | undefined> {
  const dataDir = dataDirFromEnv();
  const [{ lakeExists }, { readPlanHistory }] = await Promise.all([import('../../warehouse/lake.js'), import('../../warehouse/plan-history.js')]);
  if (!(await lakeExists(dataDir))) return undefined;
  const [{ storeFromEnvironment }, { coversListing }] = await Promise.all([import('../../store/store-from-environment.js'), import('../../store/listing-coverage.js')]);
  const targets = planTargets(harvest);
  const store = await storeFromEnvironment(dataDir);
  const coverage = await Promise.all(targets.map((target) => store.readCoverage(target.key))).finally(() => store.close());
  const incremental = new Set(targets.filter((target, index) => coversListing(coverage[index], target.maxItems)).map((target) => target.key));
  return readPlanHistory(dataDir, targets, incremental, asOfMs);
}

export function planCommand(): Command {
  return new Command('plan')
    .description('Dry run: what one run of a harvest would call and what it would cost, without a single API call')
    .argument('<name>', 'harvest name from the config')
    .option('--config <file>', 'harvest config', DEFAULT_HARVESTS_FILE)
    .option('--budget <credits>', "the run's credit cap, instead of the harvest's (as for `harvester run`)", wholeNumber(1))
    .option('--json', 'print the plan as JSON')
    .option('--at <time>', "the time the run is planned at: the items expected new since the lake's, and with track.items the items due then (ISO 8601; default now)", isoTime)
    .option('--no-history', "plan from the price table and the config alone, as for a first run, not from the lake's history")
    .addHelpText(
      'after',
      `
Per target: the endpoint, the calls (pages of ${PAGE_LIMITS.maxSynchronous}, or one async job above job_threshold), the items,
and the worst-case and expected credits, then the enrichment of its items. Prices come from
HARVESTER_PRICES (default config/prices.yaml). The plan reads no API. It reads the warehouse
(HARVESTER_DATA_DIR, default ./data) for what earlier runs observed of the same targets: a target
listed completely before is listed again only to its new items (expected at the rate its known
items were posted), and its items' comments are expected as many as they had; a line says which
it used, from how many observations, and its range. Without history a line is the price table's,
as for a first run, where every list holds max_items. A harvest with track.items reads the
warehouse for the items due then, most overdue first.

Examples:
  $ harvester plan creators-daily
  $ harvester plan topics-research --budget 1500 --json`,
    )
    .action(async (name: string, options: { config: string; budget?: number; json?: boolean; at?: number; history: boolean }) => {
      const harvest = findHarvest(loadHarvestConfig(options.config), name);
      const pricesFile = process.env.HARVESTER_PRICES ?? DEFAULT_PRICES_FILE;
      const prices = loadPriceTable(pricesFile);
      const tracking = harvest.track?.items
        ? await (await import('../../warehouse/known-items.js')).forecastTracking(dataDirFromEnv(), planTargets(harvest), harvest.track.items.days, options.at ?? Date.now(), prices)
        : undefined;
      const history = options.history ? await planHistory(harvest, options.at ?? Date.now()) : undefined;
      const plan = planHarvestCost(harvest, prices, { ...(options.budget === undefined ? {} : { budgetCredits: options.budget }), ...(tracking ? { tracking } : {}), ...(history ? { history } : {}) });
      if (options.json) process.stdout.write(`${JSON.stringify({ config: options.config, prices: pricesFile, ...plan }, null, 2)}\n`);
      else process.stdout.write(`${planText(plan, { config: options.config, prices: pricesFile })}\n`);
    });
}
