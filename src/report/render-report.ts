/**
 * The report as one HTML page: inline CSS and inline SVG charts (drawn by Vega at report time), no
 * scripts, no fonts, no images, no network. A Content-Security-Policy forbids loading anything, so
 * the page works offline and can never call home even if a stored string slipped through; every
 * stored string is escaped, and the only links are items' own http(s) addresses.
 */
import { columnChart, dailyLineChart, ENDPOINT_PALETTE, harvestColors, horizontalBarChart, renderChart, trendChart, type ColorKey, type TrendPoint } from './charts.js';
import { escapeHtml, formatNumber, formatPercent, itemLink, shortId, truncate } from './format.js';
import { RETRYABLE_STATUSES } from '../harvest/checkpoint.js';
import { ITEM_GROWTH_MIN_HOURS } from '../warehouse/schema.js';
import type { DailySeries, ReportData, TopAccount, TopItem } from './report-data.js';

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
  completed: '#59a14f',
  running: '#4e79a7',
};

/** Bars of an item, by platform: colours outside the harvests' palette, since no harvest is meant. */
const PLATFORM_COLORS: Record<string, string> = { tiktok: '#323f4b', instagram: '#c13584' };
const OTHER_PLATFORM_COLOR = '#7b8794';
const platformColor = (platform: string) => PLATFORM_COLORS[platform] ?? OTHER_PLATFORM_COLOR;

/** The platforms of the items a chart shows, each with its colour, for the chart's legend. */
function platformKey(items: { platform: string }[]): ColorKey {
  const platforms = [...new Set(items.map((item) => item.platform))].sort();
  return { title: 'platform', colors: new Map(platforms.map((platform) => [platform, platformColor(platform)])) };
}

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

function number(value: number | null | undefined): string {
  return value === null || value === undefined ? '—' : h(formatNumber(value));
}

function section(id: string, title: string, description: string, body: string): string {
  return `<section class="report-section" id="${h(id)}" aria-labelledby="${h(id)}-title">
<h2 id="${h(id)}-title">${h(title)}</h2>
<p class="description">${description}</p>
${body}
</section>`;
}

const chartBox = (svg: string) => `<div class="chart-box">${svg}</div>`;

function seriesTotals(daily: DailySeries, colors: Map<string, string>, unit: string): string {
  const items = daily.series.map((entry) => `<li><span class="swatch" style="background:${h(colors.get(entry.name))}"></span>${h(entry.name)}: <strong>${number(entry.total)}</strong> ${h(unit)}</li>`);
  const note = daily.omittedDays > 0 ? `<p class="note">Showing the latest ${daily.days.length} days; ${daily.omittedDays} earlier day(s) with ${number(daily.omittedCredits)} credits are left out.</p>` : '';
  return `<ul class="series-totals">${items.join('')}</ul>${note}`;
}

/** An item as a link to its page when it has an http(s) address, else as text; its caption, if given, as the tooltip. */
function itemAnchor(url: string | null, text: string, caption?: string | null): string {
  const href = itemLink(url);
  const title = caption ? ` title="${h(truncate(caption, 200))}"` : '';
  return href === null ? `<span${title}>${h(text)}</span>` : `<a href="${h(href)}" rel="noopener noreferrer"${title}>${h(text)}</a>`;
}

const itemName = (item: { platform: string; authorHandle: string | null; itemId: string }) => `${item.platform} ${item.authorHandle ? `@${item.authorHandle} ` : ''}${shortId(item.itemId)}`;

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

/** Says how many of a trend chart's series are one observation, drawn as a point with no line, and what a line needs; empty when none is. */
function observedOnceNote(entries: { observations: unknown[] }[], what: string, needs: string): string {
  const single = entries.filter((entry) => entry.observations.length === 1).length;
  if (single === 0) return '';
  const which = single === entries.length ? `Each of these ${h(what)} was` : `${h(formatNumber(single))} of these ${h(formatNumber(entries.length))} ${h(what)} were`;
  return `<p class="note">${which} observed once in the days shown: ${single === 1 ? 'it is' : 'each is'} a point with no line. A line needs ${needs}.</p>`;
}

/** Observations as trend points, one line per entry, labelled with its rank. */
function trendPoints<Entry extends TopItem | TopAccount>(entries: Entry[], name: (entry: Entry) => string, unit: string): TrendPoint[] {
  return entries.flatMap((entry) =>
    entry.observations.map((observation) => ({
      series: `${entry.rank}`,
      label: `#${entry.rank}`,
      at: observation.at,
      value: observation.value,
      harvest: observation.harvest,
      description: `#${entry.rank} ${name(entry)}, harvest ${observation.harvest}, ${observation.observedAt} UTC: ${formatNumber(observation.value)} ${unit}`,
    })),
  );
}

async function itemViews(data: ReportData, harvests: ColorKey): Promise<string> {
  const items = data.topItems;
  const description = `Views at each observation (<code>item_metrics</code>) of the ${h(data.settings.topItems)} items with the most views at their latest one (<code>latest_item_metrics</code>), over the latest ${h(data.settings.maxDays)} days observed; a point's colour is the harvest that observed it.`;
  if (items.length === 0) return section('item-views', 'Views over time', description, '<p class="empty">No item observations with views in the warehouse yet.</p>');
  const chart = await renderChart(
    trendChart({
      title: 'Views over time, top items',
      subtitle: 'Each line is an item, labelled with its rank in the table',
      yTitle: 'views',
      points: trendPoints(items, (item) => `${item.platform} ${item.itemId}`, 'views'),
      color: harvests,
      width: 580,
    }),
    'trend',
  );
  const rows = items.map(
    (item) => `<tr>
<td class="num">${item.rank}</td>
<td>${itemAnchor(item.url, itemName(item), item.caption)}</td>
<td class="num">${number(item.views)}</td>
<td class="num">${item.observations.length}</td>
</tr>`,
  );
  const table = `<table class="top-items-table">
<thead><tr><th class="num">#</th><th>Item</th><th class="num">Views now</th><th class="num" title="observations shown">Obs.</th></tr></thead>
<tbody>${rows.join('')}</tbody>
</table>`;
  const note = observedOnceNote(items, 'items', 'an item observed again by a later run (<code>track: { items: { days: N } }</code>, or a harvest that lists it again)');
  return section('item-views', 'Views over time', description, `<div class="beside">${chartBox(chart)}${table}</div>${note}`);
}

async function engagement(data: ReportData): Promise<string> {
  const description =
    '(likes + comments + shares) / views at the latest observation (<code>latest_item_metrics</code>) of the items in <a href="#item-views">Views over time</a>; a count the API did not report is left out of the sum.';
  const items = data.topItems.filter((item) => item.engagementRate !== null).sort((a, b) => b.engagementRate! - a.engagementRate! || a.rank - b.rank);
  if (items.length === 0) return section('engagement', 'Engagement rate', description, '<p class="empty">No item with views and engagement counts in the warehouse yet.</p>');
  const count = (value: number | null, what: string) => (value === null ? `no ${what}` : `${formatNumber(value)} ${what}`);
  const chart = await renderChart(
    horizontalBarChart({
      title: 'Engagement rate at the latest observation',
      subtitle: 'Highest first; #n is the item\'s rank by views',
      xTitle: 'engagement rate (%)',
      labelWidth: 270,
      bars: items.map((item) => ({
        label: `#${item.rank} ${itemName(item)}`,
        // Percent, so the axis reads as the labels do.
        value: item.engagementRate! * 100,
        valueText: formatPercent(item.engagementRate!),
        description: `#${item.rank} ${item.platform} ${item.itemId}: (${count(item.likes, 'likes')} + ${count(item.comments, 'comments')} + ${count(item.shares, 'shares')}) / ${formatNumber(item.views)} views: ${formatPercent(item.engagementRate!)}`,
        color: platformColor(item.platform),
        key: item.platform,
      })),
      legend: platformKey(items),
    }),
    'hbar',
  );
  return section('engagement', 'Engagement rate', description, chartBox(chart));
}

async function topGrowth(data: ReportData): Promise<string> {
  const items = data.topGrowth;
  const description = `Views gained per hour over each item's latest interval of at least ${h(formatNumber(ITEM_GROWTH_MIN_HOURS))} hour(s) between fresh observations (<code>item_growth</code>: answers from the API's cache are left out, their counts may be older than their time); current views from <code>latest_item_metrics</code>. Top ${h(data.settings.topItems)}.`;
  if (items.length === 0) return section('top-growth', 'Fastest-growing items', description, '<p class="empty">No item has grown between two observations yet: growth needs an item observed in two harvests.</p>');
  const chart = await renderChart(
    horizontalBarChart({
      title: 'Views gained per hour',
      subtitle: `Top ${items.length} item(s)`,
      xTitle: 'views per hour',
      labelWidth: 270,
      bars: items.map((item, index) => ({
        label: `${index + 1}. ${itemName(item)}`,
        value: item.viewsPerHour,
        valueText: formatNumber(Math.round(item.viewsPerHour)),
        description: `${item.platform} ${item.itemId}: +${formatNumber(item.viewsGained)} views in ${formatNumber(item.hours)} h: ${formatNumber(item.viewsPerHour)} views per hour`,
        color: platformColor(item.platform),
        key: item.platform,
      })),
      legend: platformKey(items),
    }),
    'hbar',
  );
  const rows = items.map(
    (item, index) => `<tr>
<td class="num">${index + 1}</td>
<td>${h(item.platform)}${item.kind ? ` ${h(item.kind)}` : ''}</td>
<td class="id">${itemAnchor(item.url, item.itemId)}</td>
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
  return section('top-growth', 'Fastest-growing items', description, `${chartBox(chart)}${table}`);
}

async function accountFollowers(data: ReportData, harvests: ColorKey): Promise<string> {
  const accounts = data.topAccounts;
  const description = `Followers at each fresh observation (<code>account_followers</code>: answers from the API's cache are left out) of the ${h(data.settings.topAccounts)} accounts with the most followers at their latest one, over the latest ${h(data.settings.maxDays)} days observed; a point's colour is the harvest that observed it.`;
  if (accounts.length === 0) return section('account-followers', 'Followers over time', description, '<p class="empty">No account observations yet: set <code>track: { accounts: true }</code> in a harvest to observe its channels each run.</p>');
  const chart = await renderChart(
    trendChart({
      title: 'Followers over time, top accounts',
      subtitle: 'Each line is an account, labelled with its rank in the table',
      yTitle: 'followers',
      points: trendPoints(accounts, (account) => `${account.platform} @${account.handle}`, 'followers'),
      color: harvests,
      width: 580,
    }),
    'trend',
  );
  const rows = accounts.map((account) => {
    const first = account.observations[0];
    const change = first === undefined ? null : account.observations.at(-1)!.value - first.value;
    return `<tr>
<td class="num">${account.rank}</td>
<td>${h(account.platform)} @${h(account.handle)}</td>
<td class="num">${number(account.followers)}</td>
<td class="num">${change === null ? '—' : `${change >= 0 ? '+' : ''}${number(change)}`}</td>
<td class="num">${account.observations.length}</td>
</tr>`;
  });
  const table = `<table class="top-accounts-table">
<thead><tr><th class="num">#</th><th>Account</th><th class="num">Followers now</th><th class="num" title="from the first observation shown to the latest">Change</th><th class="num" title="observations shown">Obs.</th></tr></thead>
<tbody>${rows.join('')}</tbody>
</table>`;
  const note = observedOnceNote(accounts, 'accounts', 'an account observed again by a later run (<code>track: { accounts: true }</code>)');
  return section('account-followers', 'Followers over time', description, `<div class="beside">${chartBox(chart)}${table}</div>${note}`);
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
  const shown = withCoverage ? [...REPORT_SECTIONS.slice(0, -1), ENRICHMENT_COVERAGE_SECTION, REPORT_SECTIONS.at(-1)!] : REPORT_SECTIONS;
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
