import { Command } from 'commander';
import { DEFAULT_HARVESTS_FILE, findHarvest, loadHarvestConfig } from '../../config/harvest-config.js';
import { DEFAULT_PRICES_FILE, loadPriceTable } from '../../config/prices.js';
import { isoTime, wholeNumber } from '../options.js';
import { planTargets } from '../../harvest/targets.js';
import { PAGE_LIMITS } from '../../api-catalog/endpoints.js';
import { textTable } from '../text-table.js';
import { linesOf, planHarvestCost, type CostPlan, type PlanLine } from '../../harvest/cost-plan.js';
import { dataDirFromEnv } from '../../config/environment.js';

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
    `expected:   ${totals.expectedCredits} credits`,
    `budget:     ${budget.credits} credits (${budgetSource}): ${verdict}`,
    '',
    'items: listed items per target; for enrichment, items enriched (comments: comments bought)',
    ...(notes.length > 0 ? ['notes:', ...notes.map((note) => `  - ${note}`)] : []),
    'assumptions:',
    ...plan.assumptions.map((assumption) => `  - ${assumption}`),
    plan.tracking
      ? `No API call was made: this is arithmetic on the config, the price table and the warehouse's tracked items (due at ${new Date(plan.tracking.asOfMs).toISOString()}).`
      : 'No API call was made: this is arithmetic on the config and the price table.',
  ].join('\n');
}

export function planCommand(): Command {
  return new Command('plan')
    .description('Dry run: what one run of a harvest would call and what it would cost, without a single API call')
    .argument('<name>', 'harvest name from the config')
    .option('--config <file>', 'harvest config', DEFAULT_HARVESTS_FILE)
    .option('--budget <credits>', "the run's credit cap, instead of the harvest's (as for `harvester run`)", wholeNumber(1))
    .option('--json', 'print the plan as JSON')
    .option('--at <time>', 'with track.items: the time the tracked items are due at (ISO 8601; default now)', isoTime)
    .addHelpText(
      'after',
      `
Per target: the endpoint, the calls (pages of ${PAGE_LIMITS.maxSynchronous}, or one async job above job_threshold), the items,
and the worst-case and expected credits, then the enrichment of its items. Prices come from
HARVESTER_PRICES (default config/prices.yaml). The plan reads no API and no warehouse: it assumes
a first run, where every list holds max_items. A harvest with track.items reads the warehouse
(HARVESTER_DATA_DIR, default ./data) for the items due then, most overdue first.

Examples:
  $ harvester plan creators-daily
  $ harvester plan topics-research --budget 1500 --json`,
    )
    .action(async (name: string, options: { config: string; budget?: number; json?: boolean; at?: number }) => {
      const harvest = findHarvest(loadHarvestConfig(options.config), name);
      const pricesFile = process.env.HARVESTER_PRICES ?? DEFAULT_PRICES_FILE;
      const prices = loadPriceTable(pricesFile);
      const tracking = harvest.track?.items
        ? await (await import('../../warehouse/known-items.js')).forecastTracking(dataDirFromEnv(), planTargets(harvest), harvest.track.items.days, options.at ?? Date.now(), prices)
        : undefined;
      const plan = planHarvestCost(harvest, prices, { ...(options.budget === undefined ? {} : { budgetCredits: options.budget }), ...(tracking ? { tracking } : {}) });
      if (options.json) process.stdout.write(`${JSON.stringify({ config: options.config, prices: pricesFile, ...plan }, null, 2)}\n`);
      else process.stdout.write(`${planText(plan, { config: options.config, prices: pricesFile })}\n`);
    });
}
