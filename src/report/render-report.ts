/**
 * The report as one HTML page: inline CSS and inline SVG, no scripts, no fonts, no images, no
 * network. A Content-Security-Policy forbids loading anything, so the page works offline and can
 * never call home even if a stored string slipped through; and every stored string is escaped.
 */
import { FAILURE_STATUSES, type DailySeries, type ReportData } from './report-data.js';
import { barChart, escapeXml, formatFull, horizontalBarChart, lineChart, seriesColor, truncate } from './svg-charts.js';

/** The sections, in page order: their ids are stable anchors (and what the tests look for). */
export const REPORT_SECTIONS = [
  { id: 'credits-by-harvest', title: 'Credits per harvest' },
  { id: 'credits-by-endpoint', title: 'Credits per endpoint' },
  { id: 'items-landed', title: 'Items landed per run' },
  { id: 'top-growth', title: 'Fastest-growing items' },
  { id: 'failures', title: 'Failures' },
] as const;

const STATUS_COLORS: Record<string, string> = {
  failed: '#d64545',
  completed_with_errors: '#f28e2b',
  paused: '#9c755f',
  budget_exhausted: '#b07aa1',
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
.status { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; color: #fff; white-space: nowrap; }
footer { color: #7b8794; font-size: 12px; text-align: center; margin-top: 28px; }
@media print { body { background: #fff; } section.report-section { break-inside: avoid; } nav.toc { display: none; } }
`;

const h = escapeXml;

function statusBadge(status: string): string {
  const color = STATUS_COLORS[status] ?? '#7b8794';
  return `<span class="status status-${h(status.replace(/[^a-z0-9_-]/gi, ''))}" style="background:${h(color)}">${h(status.replaceAll('_', ' '))}</span>`;
}

function utcMinute(iso: string): string {
  return `${iso.slice(0, 16).replace('T', ' ')} UTC`;
}

function number(value: number | null | undefined): string {
  return value === null || value === undefined ? '—' : h(formatFull(value));
}

function section(id: string, title: string, description: string, body: string): string {
  return `<section class="report-section" id="${h(id)}" aria-labelledby="${h(id)}-title">
<h2 id="${h(id)}-title">${h(title)}</h2>
<p class="description">${description}</p>
${body}
</section>`;
}

function seriesTotals(daily: DailySeries, unit: string): string {
  const items = daily.series.map((entry, index) => `<li><span class="swatch" style="background:${h(seriesColor(index))}"></span>${h(entry.name)}: <strong>${number(entry.total)}</strong> ${h(unit)}</li>`);
  const note = daily.omittedDays > 0 ? `<p class="note">Showing the latest ${daily.days.length} days; ${daily.omittedDays} earlier day(s) with ${number(daily.omittedCredits)} credits are left out.</p>` : '';
  return `<ul class="series-totals">${items.join('')}</ul>${note}`;
}

function creditsByHarvest(data: ReportData): string {
  const daily = data.creditsByHarvest;
  const body =
    daily.days.length === 0
      ? '<p class="empty">No billed calls in the warehouse yet.</p>'
      : `<div class="chart-box">${lineChart({
          title: 'Credits spent per day, by harvest',
          subtitle: `${daily.days[0]} to ${daily.days[daily.days.length - 1]} (UTC days)`,
          yLabel: 'credits',
          categories: daily.days,
          series: daily.series,
          integer: true,
        })}</div>${seriesTotals(daily, 'credits')}`;
  return section('credits-by-harvest', 'Credits per harvest', 'Credits charged for billed calls (<code>api_calls.credits</code>), summed per UTC day of the call, one line per harvest.', body);
}

function creditsByEndpoint(data: ReportData): string {
  const daily = data.creditsByEndpoint;
  const body =
    daily.days.length === 0
      ? '<p class="empty">No billed calls in the warehouse yet.</p>'
      : `<div class="chart-box">${barChart({
          title: 'Credits spent per day, by endpoint',
          subtitle: daily.series.some((entry) => entry.name === 'other endpoints')
            ? `Stacked, costliest at the bottom; endpoints beyond the ${data.settings.maxEndpoints - 1} costliest are summed as "other endpoints"`
            : 'Stacked, costliest endpoint at the bottom',
          yLabel: 'credits',
          categories: daily.days,
          series: daily.series,
          integer: true,
        })}</div>${seriesTotals(daily, 'credits')}`;
  return section('credits-by-endpoint', 'Credits per endpoint', 'The same credits, split by the endpoint called (<code>api_calls.endpoint</code>).', body);
}

function itemsLanded(data: ReportData): string {
  const runs = data.runs;
  if (runs.length === 0) return section('items-landed', 'Items landed per run', 'Items each run landed (<code>harvest_runs.items_landed</code>).', '<p class="empty">No harvest runs in the warehouse yet.</p>');
  const harvests = [...new Set(runs.map((run) => run.harvest))].sort();
  const series = harvests.map((harvest) => ({ name: harvest, values: runs.map((run) => (run.harvest === harvest ? run.itemsLanded : 0)) }));
  const categories = runs.map((run) => run.startedAt);
  const note = data.totals.runs > runs.length ? `<p class="note">Showing the latest ${runs.length} of ${data.totals.runs} runs.</p>` : '';
  const body = `<div class="chart-box">${barChart({
    title: 'Items landed per run, by run start (UTC)',
    subtitle: `${runs.length} run(s), ${formatFull(runs.reduce((sum, run) => sum + run.itemsLanded, 0))} items landed; colour is the harvest`,
    yLabel: 'items',
    categories,
    series,
    integer: true,
    // Each bar says which run it is and how the run ended (its latest attempt, as `harvester runs` says).
    categoryNotes: runs.map((run) => `run ${run.runId}: ${run.status}`),
  })}</div>${note}`;
  return section('items-landed', 'Items landed per run', 'Items each run landed (<code>harvest_runs.items_landed</code>), oldest run on the left; a bar\'s tooltip names the run and its status (<code>harvest_runs.status</code>).', body);
}

function topGrowth(data: ReportData): string {
  const items = data.topGrowth;
  const description = `Views gained per hour over each item's latest interval between observations (<code>item_growth</code>), intervals shorter than ${h(formatFull(data.settings.minGrowthHours * 60))} minutes skipped; current views from <code>latest_item_metrics</code>. Top ${h(data.settings.topItems)}.`;
  if (items.length === 0) return section('top-growth', 'Fastest-growing items', description, '<p class="empty">No item has grown between two observations yet: growth needs an item observed in two harvests.</p>');
  const shortId = (id: string) => (id.length > 8 ? `…${id.slice(-6)}` : id);
  const label = (item: (typeof items)[number]) => `${item.platform} ${item.authorHandle ? `@${item.authorHandle} ` : ''}${shortId(item.itemId)}`;
  const chart = horizontalBarChart({
    title: 'Views gained per hour',
    subtitle: `Top ${items.length} item(s)`,
    yLabel: 'views per hour',
    labelWidth: 270,
    bars: items.map((item, index) => ({
      label: `${index + 1}. ${label(item)}`,
      value: item.viewsPerHour,
      tooltip: `${item.platform} ${item.itemId}: +${formatFull(item.viewsGained)} views in ${formatFull(item.hours)} h (${formatFull(item.viewsPerHour)} per hour)`,
      color: item.platform === 'instagram' ? seriesColor(6) : seriesColor(0),
    })),
  });
  const rows = items.map(
    (item, index) => `<tr>
<td class="num">${index + 1}</td>
<td>${h(item.platform)}${item.kind ? ` ${h(item.kind)}` : ''}</td>
<td class="id" title="${h(item.url ?? '')}">${h(item.itemId)}</td>
<td>${item.authorHandle ? `@${h(item.authorHandle)}` : '—'}</td>
<td class="caption" title="${h(item.caption ?? '')}">${item.caption ? h(truncate(item.caption, 140)) : '—'}</td>
<td class="num">${number(Math.round(item.viewsPerHour))}</td>
<td class="num">+${number(item.viewsGained)}</td>
<td class="num">${number(Number(item.hours.toFixed(1)))}</td>
<td class="num">${number(item.latestViews)}</td>
</tr>`,
  );
  const table = `<table class="growth-table">
<thead><tr><th class="num">#</th><th>Platform</th><th>Item</th><th>Author</th><th>Caption</th><th class="num">Views / hour</th><th class="num">Views gained</th><th class="num">Over hours</th><th class="num">Views now</th></tr></thead>
<tbody>${rows.join('')}</tbody>
</table>`;
  return section('top-growth', 'Fastest-growing items', description, `<div class="chart-box">${chart}</div>${table}`);
}

function failures(data: ReportData): string {
  const description = `Runs that ended ${FAILURE_STATUSES.map((status) => `<code>${h(status)}</code>`).join(', ')}, with the reason the run recorded (<code>harvest_runs.error</code>).`;
  if (data.failures.length === 0) return section('failures', 'Failures', description, '<p class="empty">No failed, paused or budget-exhausted runs. </p>');
  const chart = horizontalBarChart({
    title: 'Runs by failure status',
    subtitle: `${formatFull(data.totals.failedRuns)} of ${formatFull(data.totals.runs)} run(s)`,
    yLabel: 'runs',
    labelWidth: 190,
    integer: true,
    bars: data.failureCounts.map((entry) => ({ label: entry.status.replaceAll('_', ' '), value: entry.runs, color: STATUS_COLORS[entry.status] })),
  });
  const rows = data.failures.map(
    (run) => `<tr>
<td class="num">${h(run.startedAt)}</td>
<td>${h(run.harvest)}</td>
<td class="id">${h(run.runId)}</td>
<td>${statusBadge(run.status)}</td>
<td class="num">${number(run.creditsSpent)}${run.budgetCredits !== null ? ` / ${number(run.budgetCredits)}` : ''}</td>
<td class="num">${number(run.itemsLanded)}</td>
<td class="error">${run.error ? h(run.error) : '—'}</td>
</tr>`,
  );
  const note = data.totals.failedRuns > data.failures.length ? `<p class="note">Listing the latest ${data.failures.length} of ${data.totals.failedRuns} failed runs.</p>` : '';
  const table = `<table class="failures-table">
<thead><tr><th class="num">Started (UTC)</th><th>Harvest</th><th>Run</th><th>Status</th><th class="num">Credits / budget</th><th class="num">Items</th><th>Error</th></tr></thead>
<tbody>${rows.join('')}</tbody>
</table>${note}`;
  return section('failures', 'Failures', description, `<div class="chart-box">${chart}</div>${table}`);
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

/** The whole page. */
export function renderReport(data: ReportData): string {
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
<nav class="toc">${REPORT_SECTIONS.map((entry) => `<a href="#${h(entry.id)}">${h(entry.title)}</a>`).join('')}</nav>
</header>
${creditsByHarvest(data)}
${creditsByEndpoint(data)}
${itemsLanded(data)}
${topGrowth(data)}
${failures(data)}
<footer>Made by <code>harvester report</code>. Self-contained: no scripts, fonts or images, nothing loaded from the network.</footer>
</main>
</body>
</html>
`;
}
