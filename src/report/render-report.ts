/**
 * The report as one HTML page: inline CSS and inline SVG charts (drawn by Vega at report time), no
 * scripts, no fonts, no images, no network. A Content-Security-Policy forbids loading anything, so
 * the page works offline and can never call home even if a stored string slipped through; every
 * stored string is escaped, and the only links are items' own http(s) addresses.
 */
import { BUDGETS_SECTION, budgetsSection } from './render-budgets.js';
import { columnChart, dailyLineChart, ENDPOINT_PALETTE, harvestColors, horizontalBarChart, renderChart, type ColorKey } from './charts.js';
import { chartBox, escapeHtml, formatNumber, formatPercent, number, section } from './format.js';
import { accountFollowers, engagement, itemViews, topGrowth } from './render-items.js';
import { RETRYABLE_STATUSES } from '../harvest/checkpoint.js';
import type { DailySeries, ReportData } from './report-data.js';

/** The sections every report has, in page order: their ids are stable anchors (and what the tests look for). */
export const REPORT_SECTIONS = [
  { id: 'credits-by-harvest', title: 'Credits per harvest' },
  { id: 'credits-by-endpoint', title: 'Credits per endpoint' },
  { id: 'cost-per-item', title: 'Cost per item' },
  { id: 'items-landed', title: 'Items landed per run' },
  { id: 'item-views', title: 'Views over time' },
  { id: 'engagement', title: 'Engagement rate' },
  { id: 'top-growth', title: 'Fastest-growing items' },
  { id: 'account-followers', title: 'Followers over time' },
  { id: 'failures', title: 'Failures' },
] as const;

/** Shown before the failures when the warehouse has an `enrichment_coverage` table. */
export const ENRICHMENT_COVERAGE_SECTION = { id: 'enrichment-coverage', title: 'Enrichment coverage' } as const;

const STATUS_COLORS: Record<string, string> = {
  failed: '#d64545',
  terminated: '#a61b1b',
  timed_out: '#8c2d19',
  cancelled: '#7b8794',
  completed_with_errors: '#f28e2b',
  paused: '#9c755f',
  budget_exhausted: '#b07aa1',
  skipped: '#bab0ac',
  completed: '#59a14f',
  running: '#4e79a7',
};

const CSS = `
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f5f7fa; color: #1f2933; font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1040px; margin: 0 auto; padding: 24px 24px 48px; }
header.report-header { margin-bottom: 20px; }
h1 { font-size: 26px; margin: 0 0 4px; letter-spacing: -0.01em; }
h2 { font-size: 18px; margin: 0 0 4px; }
.meta { color: #52606d; margin: 0; }
.meta code { font-size: 13px; background: #e4e7eb; padding: 1px 5px; border-radius: 4px; word-break: break-all; }
.totals { display: grid; grid-template-columns: repeat(4, minmax(0, 1fr)); gap: 12px; margin: 16px 0 0; padding: 0; list-style: none; }
@media (max-width: 640px) { .totals { grid-template-columns: repeat(2, minmax(0, 1fr)); } }
.totals li { background: #fff; border: 1px solid #e4e7eb; border-radius: 8px; padding: 10px 14px; }
.totals .value { display: block; font-size: 22px; font-weight: 650; font-variant-numeric: tabular-nums; }
.totals .label { color: #616e7c; font-size: 12px; text-transform: uppercase; letter-spacing: 0.04em; }
.totals li.alert .value { color: #d64545; }
nav.toc { margin: 16px 0 0; font-size: 13px; }
nav.toc a { color: #3e4c59; margin-right: 14px; }
section.report-section { background: #fff; border: 1px solid #e4e7eb; border-radius: 10px; padding: 18px 20px; margin: 18px 0; }
section.report-section > p.description { color: #52606d; margin: 0 0 10px; }
.chart-box svg { display: block; width: 100%; height: auto; }
.beside > table { margin-top: 0; }
.beside { display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: 16px; align-items: start; }
@media (max-width: 800px) { .beside { grid-template-columns: minmax(0, 1fr); } }
.empty { color: #7b8794; font-style: italic; margin: 8px 0; }
.note { color: #7b8794; font-size: 12px; margin: 6px 0 0; }
.series-totals { display: flex; flex-wrap: wrap; gap: 6px 16px; margin: 8px 0 0; padding: 0; list-style: none; font-size: 13px; color: #323f4b; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px; vertical-align: baseline; }
table { width: 100%; border-collapse: collapse; margin-top: 12px; font-size: 13px; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid #e4e7eb; vertical-align: top; }
th { color: #52606d; font-weight: 600; background: #f5f7fa; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.id { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; min-width: 9em; overflow-wrap: anywhere; }
td.caption { max-width: 320px; overflow-wrap: anywhere; }
td.error { white-space: pre-wrap; overflow-wrap: anywhere; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; color: #7b2121; }
td a { color: #2f5f8f; }
.status { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; color: #fff; white-space: nowrap; }
footer { color: #7b8794; font-size: 12px; text-align: center; margin-top: 28px; }
@media print { body { background: #fff; } section.report-section { break-inside: avoid; } nav.toc { display: none; } }
`;

const h = escapeHtml;

function statusBadge(status: string): string {
  const color = STATUS_COLORS[status] ?? '#7b8794';
  return `<span class="status status-${h(status.replace(/[^a-z0-9_-]/gi, ''))}" style="background:${h(color)}">${h(status.replaceAll('_', ' '))}</span>`;
}

function utcMinute(iso: string): string {
  return `${iso.slice(0, 16).replace('T', ' ')} UTC`;
}

function seriesTotals(daily: DailySeries, colors: Map<string, string>, unit: string): string {
  const items = daily.series.map((entry) => `<li><span class="swatch" style="background:${h(colors.get(entry.name))}"></span>${h(entry.name)}: <strong>${number(entry.total)}</strong> ${h(unit)}</li>`);
  const note = daily.omittedDays > 0 ? `<p class="note">Showing the latest ${daily.days.length} days; ${daily.omittedDays} earlier day(s) with ${number(daily.omittedCredits)} credits are left out.</p>` : '';
  return `<ul class="series-totals">${items.join('')}</ul>${note}`;
}

async function creditsByHarvest(data: ReportData, harvests: ColorKey): Promise<string> {
  const daily = data.creditsByHarvest;
  const description = 'Credits charged for billed calls (<code>api_calls.credits</code>), summed per UTC day of the call, one line per harvest; a day a harvest made no call is a gap in its line, and a day alone between gaps is a point.';
  if (daily.days.length === 0) return section('credits-by-harvest', 'Credits per harvest', description, '<p class="empty">No billed calls in the warehouse yet.</p>');
  const chart = await renderChart(
    dailyLineChart({
      title: 'Credits spent per day, by harvest',
      subtitle: `${daily.days[0]} to ${daily.days.at(-1)} (UTC days)`,
      yTitle: 'credits',
      points: daily.series.flatMap((entry) =>
        entry.values.map((value, index) => ({ day: daily.days[index]!, series: entry.name, value, description: `harvest ${entry.name}, ${daily.days[index]}: ${value === null ? 'no calls' : `${formatNumber(value)} credits`}` })),
      ),
      color: harvests,
    }),
    'line',
  );
  return section('credits-by-harvest', 'Credits per harvest', description, `${chartBox(chart)}${seriesTotals(daily, harvests.colors, 'credits')}`);
}

async function creditsByEndpoint(data: ReportData): Promise<string> {
  const daily = data.creditsByEndpoint;
  const description = 'The same credits, split by the endpoint called (<code>api_calls.endpoint</code>).';
  if (daily.days.length === 0) return section('credits-by-endpoint', 'Credits per endpoint', description, '<p class="empty">No billed calls in the warehouse yet.</p>');
  // Costliest first, so the costliest endpoint is at the bottom of each stack.
  const endpoints: ColorKey = { title: 'endpoint', colors: new Map(daily.series.map((entry, index) => [entry.name, ENDPOINT_PALETTE[index % ENDPOINT_PALETTE.length]!])) };
  const chart = await renderChart(
    columnChart({
      title: 'Credits spent per day, by endpoint',
      subtitle: daily.series.some((entry) => entry.name === 'other endpoints')
        ? `Stacked, costliest at the bottom; endpoints beyond the ${data.settings.maxEndpoints - 1} costliest are summed as "other endpoints"`
        : 'Stacked, costliest endpoint at the bottom',
      yTitle: 'credits',
      columns: daily.days,
      labels: new Map(),
      segments: daily.series.flatMap((entry) =>
        entry.values.flatMap((value, index) => (value === null ? [] : [{ column: daily.days[index]!, series: entry.name, value, description: `${daily.days[index]}, ${entry.name}: ${formatNumber(value)} credits` }])),
      ),
      color: endpoints,
    }),
    'bar',
  );
  return section('credits-by-endpoint', 'Credits per endpoint', description, `${chartBox(chart)}${seriesTotals(daily, endpoints.colors, 'credits')}`);
}

async function costPerItem(data: ReportData, harvests: ColorKey): Promise<string> {
  const description =
    'Credits each harvest spent (<code>api_calls.credits</code>, all days) divided by the distinct items its runs observed (<code>item_metrics</code>): what one item costs, enrichment included.';
  const costs = data.costPerItem;
  if (costs.length === 0) return section('cost-per-item', 'Cost per item', description, '<p class="empty">No billed calls or item observations in the warehouse yet.</p>');
  const chart = await renderChart(
    horizontalBarChart({
      title: 'Credits per item observed, by harvest',
      xTitle: 'credits per item',
      bars: costs.map((cost) => ({
        label: cost.harvest,
        value: cost.creditsPerItem ?? 0,
        valueText: cost.creditsPerItem === null ? 'no items' : formatNumber(cost.creditsPerItem),
        description: `harvest ${cost.harvest}: ${formatNumber(cost.credits)} credits for ${formatNumber(cost.items)} items: ${formatNumber(cost.creditsPerItem ?? 0)} credits per item`,
        color: harvests.colors.get(cost.harvest)!,
      })),
    }),
    'hbar',
  );
  const rows = costs.map(
    (cost) => `<tr>
<td><span class="swatch" style="background:${h(harvests.colors.get(cost.harvest))}"></span>${h(cost.harvest)}</td>
<td class="num">${number(cost.credits)}</td>
<td class="num">${number(cost.items)}</td>
<td class="num">${number(cost.creditsPerItem === null ? null : Number(cost.creditsPerItem.toFixed(2)))}</td>
</tr>`,
  );
  const table = `<table class="cost-table">
<thead><tr><th>Harvest</th><th class="num">Credits</th><th class="num">Items observed</th><th class="num">Credits per item</th></tr></thead>
<tbody>${rows.join('')}</tbody>
</table>`;
  return section('cost-per-item', 'Cost per item', description, `${chartBox(chart)}${table}`);
}

async function itemsLanded(data: ReportData, harvests: ColorKey): Promise<string> {
  const runs = data.runs;
  const description = 'Items each run landed (<code>harvest_runs.items_landed</code>), oldest run on the left, each bar labelled with its harvest and start; a bar\'s tooltip names the run and its status (<code>harvest_runs.status</code>).';
  if (runs.length === 0) return section('items-landed', 'Items landed per run', description, '<p class="empty">No harvest runs in the warehouse yet.</p>');
  const note = data.totals.runs > runs.length ? `<p class="note">Showing the latest ${runs.length} of ${data.totals.runs} runs.</p>` : '';
  const chart = await renderChart(
    columnChart({
      title: 'Items landed per run, by run start (UTC)',
      subtitle: `${runs.length} run(s), ${formatNumber(runs.reduce((sum, run) => sum + run.itemsLanded, 0))} items landed; colour is the harvest`,
      yTitle: 'items',
      columns: runs.map((run) => run.runId),
      labels: new Map(runs.map((run) => [run.runId, `${run.harvest}\n${run.startedAt}`])),
      segments: runs.map((run) => ({
        column: run.runId,
        series: run.harvest,
        value: run.itemsLanded,
        description: `run ${run.runId} of harvest ${run.harvest}, ${run.status.replaceAll('_', ' ')}, started ${run.startedAt} UTC: ${formatNumber(run.itemsLanded)} items`,
      })),
      color: harvests,
    }),
    'bar',
  );
  return section('items-landed', 'Items landed per run', description, `${chartBox(chart)}${note}`);
}

function enrichmentCoverage(data: ReportData): string {
  const coverage = data.enrichmentCoverage!;
  const { id, title } = ENRICHMENT_COVERAGE_SECTION;
  const description = 'Per enrichment, the items it was bought for and, for the others, why not (<code>enrichment_coverage</code>).';
  if (coverage.enrichments.length === 0) return section(id, title, description, '<p class="empty">No enrichment recorded yet.</p>');
  const rows = coverage.enrichments.map(
    (entry) => `<tr>
<td>${h(entry.enrichment)}</td>
<td class="num">${number(entry.items)}</td>
<td class="num">${number(entry.bought)}</td>
<td class="num">${formatPercent(entry.bought / entry.items)}</td>
<td>${entry.notBought.map((reason) => `${h(reason.reason)}: ${number(reason.items)}`).join(' · ') || '—'}</td>
</tr>`,
  );
  const table = `<table class="coverage-table">
<thead><tr><th>Enrichment</th><th class="num">Items</th><th class="num">Bought</th><th class="num">Share bought</th><th>Not bought, why</th></tr></thead>
<tbody>${rows.join('')}</tbody>
</table>`;
  return section(id, title, description, table);
}

async function failures(data: ReportData): Promise<string> {
  const description = `Runs that ended ${RETRYABLE_STATUSES.map((status) => `<code>${h(status)}</code>`).join(', ')}, with the reason the run recorded (<code>harvest_runs.error</code>), or why its status says it stopped; and runs that Temporal lists as failed, terminated, cancelled or timed out but that never reached the warehouse (a run refused its key before it recorded itself), with Temporal's reason.`;
  const unknown = data.unrecordedRunsUnknown === null ? '' : `<p class="note">Runs that stopped before the warehouse recorded them are not listed: ${h(data.unrecordedRunsUnknown)}.</p>`;
  if (data.failures.length === 0) return section('failures', 'Failures', description, `<p class="empty">No failed, paused or budget-exhausted runs. </p>${unknown}`);
  const chart = await renderChart(
    horizontalBarChart({
      title: 'Runs by failure status',
      subtitle: `${formatNumber(data.totals.failedRuns)} of ${formatNumber(data.totals.runs)} run(s)`,
      xTitle: 'runs',
      labelWidth: 190,
      counts: true,
      bars: data.failureCounts.map((entry) => ({
        label: entry.status.replaceAll('_', ' '),
        value: entry.runs,
        valueText: formatNumber(entry.runs),
        description: `${entry.status.replaceAll('_', ' ')}: ${formatNumber(entry.runs)} runs`,
        color: STATUS_COLORS[entry.status] ?? '#7b8794',
      })),
    }),
    'hbar',
  );
  const rows = data.failures.map(
    (run) => `<tr>
<td class="num">${h(run.startedAt)}</td>
<td>${h(run.harvest)}</td>
<td class="id">${h(run.runId)}</td>
<td>${statusBadge(run.status)}${run.recorded === false ? '<br><span class="note">in Temporal only</span>' : ''}</td>
<td class="num">${number(run.creditsSpent)}${run.budgetCredits !== null ? ` / ${number(run.budgetCredits)}` : ''}</td>
<td class="num">${number(run.itemsLanded)}</td>
<td class="error">${run.error ? h(run.error) : '—'}</td>
</tr>`,
  );
  const note = data.totals.failedRuns > data.failures.length ? `<p class="note">Listing the latest ${data.failures.length} of ${data.totals.failedRuns} failed runs.</p>` : '';
  const table = `<table class="failures-table">
<thead><tr><th class="num">Started (UTC)</th><th>Harvest</th><th>Run</th><th>Status</th><th class="num">Credits / budget</th><th class="num">Items</th><th>Error</th></tr></thead>
<tbody>${rows.join('')}</tbody>
</table>${note}${unknown}`;
  return section('failures', 'Failures', description, `${chartBox(chart)}${table}`);
}

function totalsList(data: ReportData): string {
  const t = data.totals;
  const cards: [string, string, boolean?][] = [
    ['Credits spent', number(t.credits)],
    ['Billed API calls', number(t.apiCalls)],
    ['Harvest runs', `${number(t.runs)}`],
    ['Harvests', number(t.harvests)],
    ['Items in warehouse', number(t.items)],
    ['Item observations', number(t.itemObservations)],
    ['Items landed (runs)', number(t.itemsLanded)],
    ['Failed / paused runs', number(t.failedRuns), t.failedRuns > 0],
  ];
  return `<ul class="totals">${cards.map(([label, value, alert]) => `<li${alert ? ' class="alert"' : ''}><span class="value">${value}</span><span class="label">${h(label)}</span></li>`).join('')}</ul>`;
}

/** The whole page; its charts are drawn concurrently. */
export async function renderReport(data: ReportData): Promise<string> {
  const harvests: ColorKey = { title: 'harvest', colors: harvestColors(data.harvests) };
  const withCoverage = data.enrichmentCoverage !== null;
  const withBudgets = (data.budgets?.length ?? 0) > 0;
  const shown = [...REPORT_SECTIONS.slice(0, -1), ...(withCoverage ? [ENRICHMENT_COVERAGE_SECTION] : []), ...(withBudgets ? [BUDGETS_SECTION] : []), REPORT_SECTIONS.at(-1)!];
  const sections = await Promise.all([
    creditsByHarvest(data, harvests),
    creditsByEndpoint(data),
    costPerItem(data, harvests),
    itemsLanded(data, harvests),
    itemViews(data, harvests),
    engagement(data),
    topGrowth(data),
    accountFollowers(data, harvests),
    ...(withCoverage ? [enrichmentCoverage(data)] : []),
    ...(withBudgets ? [budgetsSection(data.budgets!)] : []),
    failures(data),
  ]);
  const range = data.totals.firstCallAt && data.totals.lastCallAt ? ` · calls from ${h(data.totals.firstCallAt)} to ${h(data.totals.lastCallAt)} UTC` : '';
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="generator" content="social-harvester report">
<title>Harvest report · ${h(utcMinute(data.generatedAt))}</title>
<link rel="icon" href="data:,">
<style>${CSS}</style>
</head>
<body>
<main>
<header class="report-header">
<h1>Harvest report</h1>
<p class="meta">Generated <time datetime="${h(data.generatedAt)}">${h(utcMinute(data.generatedAt))}</time> from <code>${h(data.warehousePath)}</code>${range}</p>
${totalsList(data)}
<nav class="toc">${shown.map((entry) => `<a href="#${h(entry.id)}">${h(entry.title)}</a>`).join('')}</nav>
</header>
${sections.join('\n')}
<footer>Made by <code>harvester report</code> with Vega-Lite. Self-contained: no scripts, fonts or images, nothing loaded from the network; the only links are the items' own pages.</footer>
</main>
</body>
</html>
`;
}
