/**
 * The report's sections about items and accounts: views over time, engagement, the fastest-growing
 * items and followers over time, drawn from what read-report.ts read of the analyst views.
 */
import { horizontalBarChart, renderChart, trendChart, type ColorKey, type TrendPoint } from './charts.js';
import { chartBox, escapeHtml, formatNumber, formatPercent, itemAnchor, number, section, shortId, truncate } from './format.js';
import { ITEM_GROWTH_MIN_HOURS } from '../warehouse/schema.js';
import type { ReportData, TopAccount, TopItem } from './report-data.js';

const h = escapeHtml;

/** Bars of an item, by platform: colours outside the harvests' palette, since no harvest is meant. */
const PLATFORM_COLORS: Record<string, string> = { tiktok: '#323f4b', instagram: '#c13584' };
const OTHER_PLATFORM_COLOR = '#7b8794';
const platformColor = (platform: string) => PLATFORM_COLORS[platform] ?? OTHER_PLATFORM_COLOR;

/** The platforms of the items a chart shows, each with its colour, for the chart's legend. */
function platformKey(items: { platform: string }[]): ColorKey {
  const platforms = [...new Set(items.map((item) => item.platform))].sort();
  return { title: 'platform', colors: new Map(platforms.map((platform) => [platform, platformColor(platform)])) };
}

const itemName = (item: { platform: string; authorHandle: string | null; itemId: string }) => `${item.platform} ${item.authorHandle ? `@${item.authorHandle} ` : ''}${shortId(item.itemId)}`;

/** Says how many of a trend chart's series are one observation, drawn as a point with no line, and what a line needs; empty when none is. */
function observedOnceNote(entries: { observations: unknown[] }[], what: string, needs: string): string {
  const single = entries.filter((entry) => entry.observations.length === 1).length;
  if (single === 0) return '';
  const which = single === entries.length ? `Each of these ${h(what)} was` : `${h(formatNumber(single))} of these ${h(formatNumber(entries.length))} ${h(what)} were`;
  return `<p class="note">${which} observed once in the days shown: ${single === 1 ? 'it is' : 'each is'} a point with no line. A line needs ${needs}.</p>`;
}

/** The entries' observations as a trend chart: a line per entry, labelled with its rank, each point in the colour of the harvest that observed it. */
function trendOf<Entry extends TopItem | TopAccount>(entries: Entry[], chart: { title: string; entry: string; unit: string }, name: (entry: Entry) => string, harvests: ColorKey): Promise<string> {
  return renderChart(
    trendChart({
      title: chart.title,
      subtitle: `Each line is an ${chart.entry}, labelled with its rank in the table`,
      yTitle: chart.unit,
      points: trendPoints(entries, name, chart.unit),
      color: harvests,
      width: 580,
    }),
    'trend',
  );
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

export async function itemViews(data: ReportData, harvests: ColorKey): Promise<string> {
  const items = data.topItems;
  const description = `Views at each observation (<code>item_metrics</code>) of the ${h(data.settings.topItems)} items with the most views at their latest one (<code>latest_item_metrics</code>), over the latest ${h(data.settings.maxDays)} days observed; a point's colour is the harvest that observed it.`;
  if (items.length === 0) return section('item-views', 'Views over time', description, '<p class="empty">No item observations with views in the warehouse yet.</p>');
  const chart = await trendOf(items, { title: 'Views over time, top items', entry: 'item', unit: 'views' }, (item) => `${item.platform} ${item.itemId}`, harvests);
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

export async function engagement(data: ReportData): Promise<string> {
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

export async function topGrowth(data: ReportData): Promise<string> {
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

export async function accountFollowers(data: ReportData, harvests: ColorKey): Promise<string> {
  const accounts = data.topAccounts;
  const description = `Followers at each fresh observation (<code>account_followers</code>: answers from the API's cache are left out) of the ${h(data.settings.topAccounts)} accounts with the most followers at their latest one, over the latest ${h(data.settings.maxDays)} days observed; a point's colour is the harvest that observed it.`;
  if (accounts.length === 0) return section('account-followers', 'Followers over time', description, '<p class="empty">No account observations yet: set <code>track: { accounts: true }</code> in a harvest to observe its channels each run.</p>');
  const chart = await trendOf(accounts, { title: 'Followers over time, top accounts', entry: 'account', unit: 'followers' }, (account) => `${account.platform} @${account.handle}`, harvests);
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
