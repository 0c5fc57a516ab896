import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { reportCommand } from '../../src/cli/commands/report.js';
import { TOOLS_DIR } from '../../src/project-paths.js';
import { columnChart, dailyLineChart, HARVEST_PALETTE, harvestColors, horizontalBarChart, renderChart, spreadLabels, trendChart } from '../../src/report/charts.js';
import { escapeHtml, formatNumber, formatPercent } from '../../src/report/format.js';
import { loadReportData } from '../../src/report/read-report.js';
import type { ReportData } from '../../src/report/report-data.js';
import { ENRICHMENT_COVERAGE_SECTION, REPORT_SECTIONS, renderReport } from '../../src/report/render-report.js';
import type { Landing, RunLanding } from '../../src/store/landing.js';
import { LocalStore } from '../../src/store/store.js';
import { writeLegacyLanding } from '../support/legacy-landing.js';
import { landedKeys, landedLanding } from '../support/landed.js';
import { openLake } from '../../src/warehouse/lake.js';
import { lakeCatalogFile } from '../../src/store/layout.js';
import { loadLandings } from '../../src/warehouse/loader.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { clientFor } from '../support/client.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { landSampleHarvest } from '../support/sample-harvest.js';

/** The headless Chromium that `npm run setup -- --for-tests` unpacks from @sparticuz/chromium. */
const CHROMIUM = join(TOOLS_DIR, 'chromium', 'chromium');
const DAY_MS = 86_400_000;
const HOSTILE_CAPTION = `Sunrise flow <script>alert("caption")</script> & <img src=x onerror=alert(1)> 'yoga'`;
const HOSTILE_ERROR = `upstream answered 502 <script>alert("error")</script> & gave up after 5 tries`;
const BOOST = 5_000_000;

/**
 * Three sample harvests a day apart, as the emulator sees them (its clock advanced a day between
 * runs) and as the warehouse sees them (each run's landings re-timed to its day), the middle one
 * under another harvest name; plus runs that failed, paused or ran out of budget.
 */
const RUNS = [
  { runId: 'run-a', harvest: 'sample', daysAgo: 2 },
  { runId: 'run-b', harvest: 'trending', daysAgo: 1 },
  { runId: 'run-c', harvest: 'sample', daysAgo: 0 },
];

let emulator: TestEmulator;
let dataDir: string;
let data: ReportData;
let html: string;
/** The item given a hostile caption and a burst of views in the last run: the top grower. */
let boostedItem: string;
const now = Date.now();

function shift(iso: string | undefined, ms: number): string | undefined {
  return iso === undefined ? undefined : new Date(Date.parse(iso) - ms).toISOString();
}

/**
 * Rewrites a run's landings in place (same keys) before they are loaded: moved to noon UTC of
 * the day `daysAgo` days before yesterday (so no run straddles midnight), under another harvest.
 */
function retime(runId: string, harvest: string, daysAgo: number): Landing[] {
  const keys = landedKeys(dataDir).filter((name) => name.startsWith(`${runId}/`));
  const original = keys.map((key) => landedLanding(dataDir, key));
  const first = Math.min(...original.flatMap((landing) => (landing.kind === 'page' ? [Date.parse(landing.observed_at)] : [])));
  const noon = Math.floor(now / DAY_MS) * DAY_MS - (daysAgo + 1) * DAY_MS + DAY_MS / 2;
  const ms = first - noon;
  const rewritten = original.map((landing, index) => {
    const moved: Landing =
      landing.kind === 'run'
        ? { ...landing, harvest, started_at: shift(landing.started_at, ms)!, finished_at: shift(landing.finished_at, ms) }
        : landing.kind === 'page'
          ? { ...landing, harvest, observed_at: shift(landing.observed_at, ms)! }
          : landing;
    expect(writeLegacyLanding(dataDir, moved)).toBe(keys[index]);
    return moved;
  });
  // The rewritten landings (files, as an earlier version wrote them) replace the run's segment.
  rmSync(join(dataDir, 'segments', keys[0]!.split('/')[0]!), { recursive: true, force: true });
  return rewritten;
}

/**
 * In the last run, one channel video that the run before also saw, and that the last run saw
 * nowhere else, gets a hostile caption and BOOST more views.
 */
function boostOneItem(last: Landing[], previous: Landing[]): string {
  const pages = (landings: Landing[]) => landings.flatMap((landing) => (landing.kind === 'page' ? [landing] : []));
  const seen = (landing: Landing, id: string) => JSON.stringify(landing).includes(id);
  const videos = pages(last).find((landing) => landing.endpoint === 'tiktok/channel-videos' && landing.page === 2)!;
  const items = videos.data as { id: string; caption?: string; metrics: { views: number } }[];
  const chosen = items.find(
    (item) => pages(last).every((landing) => landing === videos || !seen(landing, item.id)) && pages(previous).some((landing) => landing.endpoint === 'tiktok/channel-videos' && seen(landing, item.id)),
  );
  expect(chosen, 'a channel video seen in both of the last two runs').toBeDefined();
  chosen!.caption = HOSTILE_CAPTION;
  chosen!.metrics.views += BOOST;
  writeLegacyLanding(dataDir, videos);
  return chosen!.id;
}

function failedRun(runId: string, harvest: string, status: string, hoursAgo: number, extra: Partial<RunLanding>): RunLanding {
  const started = new Date(now - hoursAgo * 3_600_000);
  return { format: 1, kind: 'run', run_id: runId, harvest, seq: 2, status, started_at: started.toISOString(), finished_at: new Date(started.getTime() + 600_000).toISOString(), ...extra };
}

async function scalar(sql: string): Promise<number> {
  const result = await queryWarehouse(dataDir, sql);
  return Number(Object.values(result.rows[0]!)[0]);
}

/** The markup of one section of the page. */
function sectionOf(page: string, id: string): string {
  const match = new RegExp(`<section class="report-section" id="${id}"[\\s\\S]*?</section>`).exec(page);
  expect(match, `section #${id}`).not.toBeNull();
  return match![0];
}

/**
 * The data marks of a chart, in drawing order: each one's description (Vega's aria-label, see
 * src/report/charts.ts), the value it ends in, and its fill colour. `kind` is Vega's role
 * description: bar, point (on a line over days) or circle (on a trend line).
 */
interface Mark {
  label: string;
  value: number;
  color: string;
}
function marks(markup: string, kind: 'bar' | 'point' | 'circle'): Mark[] {
  return [...markup.matchAll(new RegExp(`<path aria-label="([^"]*)" role="graphics-symbol" aria-roledescription="${kind}"[^>]*? fill="([^"]+)"`, 'g'))].map(([, label, color]) => ({
    label: label!,
    value: Number(/: ([\d,.]+)[^:]*$/.exec(label!)![1]!.replaceAll(',', '')),
    color: color!,
  }));
}
const bars = (markup: string) => marks(markup, 'bar').map((mark) => mark.value);
/** The `d` of each line drawn in a chart (Vega's line marks: one path per series, empty when it has no two adjacent points). */
const linePaths = (markup: string) => [...markup.matchAll(/<g class="mark-line role-mark[^"]*"[^>]*>([\s\S]*?)<\/g>/g)].flatMap((group) => [...group[1]!.matchAll(/<path [^>]*?d="([^"]*)"/g)].map((match) => match[1]!));
const points = (markup: string) => marks(markup, 'point').map((mark) => mark.value);
const labels = (markup: string, kind: 'bar' | 'point' | 'circle') => marks(markup, kind).map((mark) => mark.label);
const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);

beforeAll(async () => {
  emulator = await startTestEmulator();
  dataDir = mkdtempSync(join(tmpdir(), 'report-'));
  const client = clientFor(emulator);
  try {
    let previous: Landing[] = [];
    for (const [index, run] of RUNS.entries()) {
      if (index > 0) expect((await emulator.admin('clock', { advance_seconds: 86_400 })).status).toBe(200);
      await landSampleHarvest(client, emulator, dataDir, run.runId, { fresh: index > 0 });
      const landings = retime(run.runId, run.harvest, run.daysAgo);
      if (index === RUNS.length - 1) boostedItem = boostOneItem(landings, previous);
      previous = landings;
    }
  } finally {
    await client.close();
  }
  await new LocalStore(dataDir).writeLanding(failedRun('run-f1', 'trending', 'failed', 30, { error: HOSTILE_ERROR, credits_spent: 40, budget_credits: 500, items_landed: 0 }));
  await new LocalStore(dataDir).writeLanding(failedRun('run-f2', 'sample', 'completed_with_errors', 20, { error: '2 targets failed: tiktok/comments answered 404 not_found', credits_spent: 120, budget_credits: 500, items_landed: 12 }));
  await new LocalStore(dataDir).writeLanding(failedRun('run-f3', 'trending', 'paused', 10, { error: 'insufficient credits: balance 12, the next call costs 40', credits_spent: 0, items_landed: 0 }));
  await new LocalStore(dataDir).writeLanding(failedRun('run-f4', 'sample', 'budget_exhausted', 5, { error: 'no budget left for tiktok/search', credits_spent: 500, budget_credits: 500, items_landed: 25 }));
  await loadLandings(dataDir);
  data = await loadReportData(dataDir, { now: new Date(now) });
  html = await renderReport(data);
}, 120_000);
/** Folders the tests below make, removed at the end (the browser's, screenshots and all, too). */
const temporaryDirs: string[] = [];
function temporaryDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temporaryDirs.push(dir);
  return dir;
}
afterAll(async () => {
  await emulator?.close();
  for (const dir of [dataDir, ...temporaryDirs]) if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('harvester report: the HTML page', () => {
  it('has a header with the generation time, the warehouse path and totals that match the warehouse', async () => {
    expect(html.startsWith('<!DOCTYPE html>')).toBe(true);
    expect(html).toContain(`<time datetime="${new Date(now).toISOString()}">`);
    expect(html).toContain(escapeHtml(lakeCatalogFile(dataDir)));
    const card = (label: string) => new RegExp(`<span class="value">([^<]+)</span><span class="label">${label}</span>`).exec(html)?.[1]?.replaceAll(',', '');
    const credits = await scalar('SELECT sum(credits) FROM api_calls');
    expect(credits).toBeGreaterThan(0);
    expect(Number(card('Credits spent'))).toBe(credits);
    expect(Number(card('Billed API calls'))).toBe(await scalar('SELECT count(*) FROM api_calls'));
    expect(Number(card('Harvest runs'))).toBe(7);
    expect(Number(card('Harvests'))).toBe(2);
    expect(Number(card('Items in warehouse'))).toBe(await scalar('SELECT count(*) FROM items'));
    expect(Number(card('Failed / paused runs'))).toBe(4);
    for (const { id } of REPORT_SECTIONS) sectionOf(html, id);
  });

  it('charts credits per harvest per day: a point per day a harvest made calls, summing to the credits of each; a day without calls is a gap, not a zero', async () => {
    const markup = sectionOf(html, 'credits-by-harvest');
    expect(markup).toContain('<svg class="chart chart-line"');
    expect(data.creditsByHarvest.days).toHaveLength(3);
    expect(data.creditsByHarvest.series.map((entry) => entry.name).sort()).toEqual(['sample', 'trending']);
    const perDay = await queryWarehouse(dataDir, "SELECT strftime(timezone('UTC', called_at), '%Y-%m-%d') AS day, harvest, sum(credits) AS credits FROM api_calls GROUP BY ALL");
    // sample on the first and last days, trending on the middle one: three points, none at zero.
    expect(perDay.rows).toHaveLength(3);
    expect(points(markup)).toHaveLength(3);
    expect(points(markup).every((value) => value > 0)).toBe(true);
    expect(sum(points(markup))).toBe(await scalar('SELECT sum(credits) FROM api_calls'));
    for (const row of perDay.rows) expect(labels(markup, 'point')).toContain(`harvest ${row.harvest}, ${row.day}: ${formatNumber(Number(row.credits))} credits`);
    expect(data.creditsByHarvest.series.find((entry) => entry.name === 'trending')!.values).toEqual([null, expect.any(Number), null]);
    expect(data.creditsByHarvest.series.find((entry) => entry.name === 'sample')!.values).toEqual([expect.any(Number), null, expect.any(Number)]);
    // No line reaches down to zero between runs: sample's two days are not joined through the day
    // between (its path is two moves, no segment), and trending's one day is a point alone.
    expect(linePaths(markup)).toHaveLength(2);
    expect(linePaths(markup).filter((path) => path.includes('L'))).toEqual([]);
  });

  it('charts credits per endpoint per day: a stacked bar per day and endpoint that was charged', async () => {
    const ungrouped = await renderReport(await loadReportData(dataDir, { now: new Date(now), maxEndpoints: 50 }));
    const markup = sectionOf(ungrouped, 'credits-by-endpoint');
    const charged = await scalar("SELECT count(*) FROM (SELECT strftime(timezone('UTC', called_at), '%Y-%m-%d'), endpoint FROM api_calls GROUP BY ALL HAVING sum(credits) > 0)");
    expect(bars(markup)).toHaveLength(charged);
    expect(sum(bars(markup))).toBe(await scalar('SELECT sum(credits) FROM api_calls'));
    // By default the smaller endpoints share one series, and nothing is lost in the grouping.
    const endpoints = await scalar('SELECT count(DISTINCT endpoint) FROM api_calls');
    expect(endpoints).toBeGreaterThan(data.settings.maxEndpoints);
    expect(data.creditsByEndpoint.series).toHaveLength(data.settings.maxEndpoints);
    expect(data.creditsByEndpoint.series.at(-1)!.name).toBe('other endpoints');
    expect(sum(bars(sectionOf(html, 'credits-by-endpoint')))).toBe(await scalar('SELECT sum(credits) FROM api_calls'));
  });

  it('charts items landed per run: a bar per run that landed items, with its count, labelled by harvest', async () => {
    const markup = sectionOf(html, 'items-landed');
    const landed = await queryWarehouse(dataDir, 'SELECT run_id, harvest, items_landed FROM harvest_runs WHERE items_landed > 0 ORDER BY started_at');
    expect(landed.rows).toHaveLength(5);
    expect(bars(markup)).toEqual(landed.rows.map((row) => Number(row.items_landed)));
    expect(sum(bars(markup))).toBe(await scalar('SELECT sum(items_landed) FROM harvest_runs'));
    expect(labels(markup, 'bar').map((label) => /^run (\S+) of harvest (\S+),/.exec(label)!.slice(1))).toEqual(landed.rows.map((row) => [row.run_id, row.harvest]));
    // Every run, the ones with no items too, has its column labelled with its harvest over its start, oldest first.
    const runs = await queryWarehouse(dataDir, "SELECT harvest, strftime(timezone('UTC', started_at), '%Y-%m-%d %H:%M') AS started FROM harvest_runs ORDER BY started_at");
    const columnLabels = [...markup.matchAll(/<tspan>([^<]*)<\/tspan><tspan x="0" dy="\d+">([^<]*)<\/tspan>/g)].map((match) => [match[1], match[2]]);
    expect(columnLabels).toEqual(runs.rows.map((row) => [row.harvest, row.started]));
  });

  it('lists the ten fastest-growing items, views per hour as the warehouse has them', async () => {
    const markup = sectionOf(html, 'top-growth');
    expect(data.topGrowth).toHaveLength(10);
    expect(bars(markup)).toHaveLength(10);
    expect(markup.match(/<tr>\n<td class="num">/g)).toHaveLength(10);
    const rates = bars(markup);
    expect([...rates].sort((a, b) => b - a)).toEqual(rates);
    // The boosted item leads: its views per hour, from the raw observations, are in the first bar
    // (which shows two decimals).
    expect(data.topGrowth[0]!.itemId).toBe(boostedItem);
    // Fresh observations only: an answer from the API's cache may be older than its time.
    const observations = await queryWarehouse(dataDir, `SELECT views, epoch(observed_at) AS at FROM item_metrics WHERE item_id = '${boostedItem}' AND from_cache IS NOT TRUE ORDER BY observed_at`);
    const last = observations.rows.at(-1)!;
    const before = observations.rows.filter((row) => Number(last.at) - Number(row.at) >= 3_600).at(-1)!;
    const expected = (Number(last.views) - Number(before.views)) / ((Number(last.at) - Number(before.at)) / 3_600);
    expect(Number(last.views) - Number(before.views)).toBeGreaterThanOrEqual(BOOST);
    expect(data.topGrowth[0]!.viewsPerHour).toBeCloseTo(expected, 3);
    // The bar shows it rounded to two decimals: within half a hundredth.
    expect(Math.abs(rates[0]! - expected)).toBeLessThanOrEqual(0.005 + 1e-9);
    // "Views now" comes from latest_item_metrics.
    for (const item of data.topGrowth) {
      expect(item.latestViews).toBe(await scalar(`SELECT views FROM latest_item_metrics WHERE platform = '${item.platform}' AND item_id = '${item.itemId}'`));
    }
  });

  it('charts the cost per item of each harvest: its credits over the distinct items its runs observed', async () => {
    const markup = sectionOf(html, 'cost-per-item');
    const expected = (
      await queryWarehouse(
        dataDir,
        `SELECT r.harvest, (SELECT sum(credits) FROM api_calls c WHERE c.harvest = r.harvest) AS credits, count(DISTINCT (m.platform, m.item_id)) AS items
         FROM item_metrics m JOIN harvest_runs r USING (run_id) GROUP BY r.harvest ORDER BY r.harvest`,
      )
    ).rows.map((row) => ({ harvest: String(row.harvest), credits: Number(row.credits), items: Number(row.items) }));
    expect(expected.map((row) => row.harvest)).toEqual(['sample', 'trending']);
    expect(sum(expected.map((row) => row.credits))).toBe(await scalar('SELECT sum(credits) FROM api_calls'));
    expect(labels(markup, 'bar')).toEqual(
      expected.map((row) => `harvest ${row.harvest}: ${formatNumber(row.credits)} credits for ${formatNumber(row.items)} items: ${formatNumber(row.credits / row.items)} credits per item`),
    );
    for (const row of expected) expect(markup).toContain(`${row.harvest}</td>\n<td class="num">${formatNumber(row.credits)}</td>\n<td class="num">${formatNumber(row.items)}</td>`);
  });

  it('charts views over time of the items with the most views now, a point per observation, with links to the items beside', async () => {
    const markup = sectionOf(html, 'item-views');
    const top = (await queryWarehouse(dataDir, 'SELECT platform, item_id, url FROM latest_item_metrics JOIN items USING (platform, item_id) ORDER BY views DESC, platform, item_id LIMIT 10')).rows;
    expect(data.topItems.map((item) => item.itemId)).toEqual(top.map((row) => row.item_id));
    expect(data.topItems[0]!.itemId).toBe(boostedItem);
    const observations = await queryWarehouse(
      dataDir,
      `SELECT m.platform, m.item_id, strftime(timezone('UTC', m.observed_at), '%Y-%m-%d %H:%M') AS observed, m.views, r.harvest
       FROM item_metrics m JOIN harvest_runs r USING (run_id)`,
    );
    const expected = top.flatMap((item, index) =>
      observations.rows
        .filter((row) => row.platform === item.platform && row.item_id === item.item_id)
        .map((row) => `#${index + 1} ${row.platform} ${row.item_id}, harvest ${row.harvest}, ${row.observed} UTC: ${formatNumber(Number(row.views))} views`),
    );
    expect(expected.length).toBeGreaterThan(top.length);
    expect(labels(markup, 'circle').sort()).toEqual(expected.sort());
    // The boosted item's last point holds its boost.
    expect(Math.max(...marks(markup, 'circle').filter((mark) => mark.label.startsWith('#1 ')).map((mark) => mark.value))).toBeGreaterThan(BOOST);
    // Items observed once are points alone, and the page says how many.
    const once = data.topItems.filter((item) => item.observations.length === 1).length;
    expect(once).toBeGreaterThan(0);
    expect(markup).toContain(`<p class="note">${once} of these 10 items were observed once in the days shown: each is a point with no line.`);
    // The labels at the lines' ends, one per item, none over another.
    const boxes = labelBoxes(markup);
    expect(boxes.map((box) => box.text).sort()).toEqual(top.map((_, index) => `#${index + 1}`).sort());
    expect(overlaps(boxes)).toEqual([]);
    // The table beside links each item to its page, in rank order.
    const links = [...markup.matchAll(/<a href="([^"]+)" rel="noopener noreferrer"/g)].map((match) => match[1]);
    expect(links).toEqual(top.map((row) => row.url));
    expect(links.every((link) => /^https:\/\/www\.(tiktok|instagram)\.com\//.test(link!))).toBe(true);
  });

  it('charts the engagement rate of those items at their latest observation, highest first', async () => {
    const markup = sectionOf(html, 'engagement');
    const latest = (await queryWarehouse(dataDir, 'SELECT platform, item_id, views, likes, comments, shares FROM latest_item_metrics ORDER BY views DESC, platform, item_id LIMIT 10')).rows;
    const expected = latest
      .map((row, index) => ({ rank: index + 1, id: `${row.platform} ${row.item_id}`, rate: (Number(row.likes ?? 0) + Number(row.comments ?? 0) + Number(row.shares ?? 0)) / Number(row.views) }))
      .sort((a, b) => b.rate - a.rate);
    const found = marks(markup, 'bar');
    expect(found).toHaveLength(10);
    found.forEach((mark, index) => {
      expect(mark.label.startsWith(`#${expected[index]!.rank} ${expected[index]!.id}: (`)).toBe(true);
      expect(mark.label.endsWith(`: ${formatPercent(expected[index]!.rate)}`)).toBe(true);
    });
    // Bars are coloured by platform, and a legend says which colour is which.
    const legend = [...markup.matchAll(/role-legend-symbol[^>]*><path [^>]*fill="([^"]+)"[\s\S]*?role-legend-label[^>]*><text[^>]*>([^<]+)<\/text>/g)].map((match) => [match[2]!, match[1]!] as const);
    const platforms = [...new Set(latest.map((row) => String(row.platform)))].sort();
    expect(legend.map(([platform]) => platform).sort()).toEqual(platforms);
    for (const mark of found) expect(mark.color).toBe(new Map(legend).get(/^#\d+ (\w+) /.exec(mark.label)![1]!));
    // The boosted item: a burst of views with no more likes is the lowest rate.
    expect(found.at(-1)!.label).toContain(boostedItem);
    const boosted = data.topItems.find((item) => item.itemId === boostedItem)!;
    expect(boosted.engagementRate).toBeCloseTo((boosted.likes! + boosted.comments!) / boosted.views, 12);
    expect(boosted.shares).toBeNull();
  });

  it('charts followers over time of the accounts with the most followers, one point per observation, in its harvest\'s colour', async () => {
    const markup = sectionOf(html, 'account-followers');
    const observed = await queryWarehouse(
      dataDir,
      `SELECT a.platform, a.handle, strftime(timezone('UTC', a.observed_at), '%Y-%m-%d %H:%M') AS observed, a.followers, r.harvest
       FROM account_followers a JOIN harvest_runs r USING (run_id) ORDER BY a.observed_at`,
    );
    expect(observed.rows.map((row) => row.harvest)).toEqual(['sample', 'trending', 'sample']);
    expect(labels(markup, 'circle')).toEqual(observed.rows.map((row) => `#1 ${row.platform} @${row.handle}, harvest ${row.harvest}, ${row.observed} UTC: ${formatNumber(Number(row.followers))} followers`));
    const [first, last] = [Number(observed.rows[0]!.followers), Number(observed.rows.at(-1)!.followers)];
    expect(markup).toContain(`<td class="num">${formatNumber(last)}</td>\n<td class="num">+${formatNumber(last - first)}</td>\n<td class="num">3</td>`);
  });

  it('gives each harvest one colour, the same in every chart, legend and swatch', () => {
    const colors = harvestColors(['sample', 'trending']);
    expect(harvestColors(data.harvests)).toEqual(colors);
    expect(new Set(colors.values()).size).toBe(2);
    for (const id of ['credits-by-harvest', 'cost-per-item', 'items-landed', 'item-views', 'account-followers']) {
      const markup = sectionOf(html, id);
      const seen = new Map<string, Set<string>>();
      for (const mark of [...marks(markup, 'point'), ...marks(markup, 'bar'), ...marks(markup, 'circle')]) {
        const harvest = /harvest (\w+)/.exec(mark.label)![1]!;
        seen.set(harvest, new Set([...(seen.get(harvest) ?? []), mark.color]));
      }
      expect(seen, id).toEqual(new Map([...colors].map(([harvest, color]) => [harvest, new Set([color])])));
      const legend = [...markup.matchAll(/role-legend-symbol[^>]*><path [^>]*fill="([^"]+)"[\s\S]*?role-legend-label[^>]*><text[^>]*>([^<]+)<\/text>/g)].map((match) => [match[2]!, match[1]!] as const);
      if (id !== 'cost-per-item') expect(new Map(legend), id).toEqual(colors);
    }
    for (const [harvest, color] of colors) {
      expect(sectionOf(html, 'credits-by-harvest')).toContain(`<span class="swatch" style="background:${color}"></span>${harvest}:`);
      expect(sectionOf(html, 'cost-per-item')).toContain(`<span class="swatch" style="background:${color}"></span>${harvest}</td>`);
    }
  });

  it("counts enrichment coverage per enrichment as the warehouse's view has it", async () => {
    expect(html).toContain(`id="${ENRICHMENT_COVERAGE_SECTION.id}"`);
    const counted = await queryWarehouse(dataDir, 'SELECT enrichment, count(*) AS items, count(bought_at) AS bought FROM enrichment_coverage GROUP BY ALL ORDER BY enrichment');
    expect(data.enrichmentCoverage!.enrichments.map((entry) => [entry.enrichment, entry.items, entry.bought])).toEqual(counted.rows.map((row) => [row.enrichment, Number(row.items), Number(row.bought)]));
    expect(counted.rows.some((row) => Number(row.bought) > 0)).toBe(true);
  });

  it('lists failed, paused and budget-exhausted runs with their errors, a bar per status', () => {
    const markup = sectionOf(html, 'failures');
    expect(bars(markup)).toEqual([1, 1, 1, 1]);
    expect(labels(markup, 'bar')).toEqual(['failed', 'completed with errors', 'paused', 'budget exhausted'].map((status) => `${status}: 1 runs`));
    expect(markup.match(/<td class="error">/g)).toHaveLength(4);
    expect(markup).toContain('insufficient credits: balance 12, the next call costs 40');
    expect(markup).not.toContain('run-a');
  });

  it('escapes every stored string: a hostile caption or error makes no tags', async () => {
    expect(html).not.toMatch(/<script/i);
    expect(html).not.toMatch(/<img/i);
    expect(html).toContain('Sunrise flow &lt;script&gt;alert(&quot;caption&quot;)&lt;/script&gt; &amp; &lt;img src=x onerror=alert(1)&gt; &#39;yoga&#39;');
    expect(html).toContain('upstream answered 502 &lt;script&gt;alert(&quot;error&quot;)&lt;/script&gt; &amp; gave up');
    // The same in a chart's text and attributes.
    const hostile = "x' onload='alert(1)\" <b>";
    const chart = await renderChart(
      columnChart({
        title: '<script>t</script>',
        yTitle: 'y',
        columns: ['a"b', '<c>'],
        labels: new Map([['<c>', '<d>\n"e"']]),
        segments: [
          { column: 'a"b', series: hostile, value: 1, description: `${hostile}: 1` },
          { column: '<c>', series: hostile, value: 2, description: `${hostile}: 2` },
        ],
        color: { title: '<i>', colors: new Map([[hostile, '#000000']]) },
      }),
      'bar',
    );
    // Vega quotes attributes with ", so a ' stays as it is and only a " could end one early.
    expect(chart).not.toMatch(/<script|<c>|<d>|<b>|<i>|" onload|" <b/);
    expect(chart).toContain('&lt;script&gt;t&lt;/script&gt;');
    expect(labels(chart, 'bar')).toEqual([`x' onload='alert(1)&quot; &lt;b&gt;: 1`, `x' onload='alert(1)&quot; &lt;b&gt;: 2`]);
  });

  it('is self-contained: nothing loaded from the network, no scripts; its only URLs are links to items', async () => {
    expect(html).not.toMatch(/<script/i);
    expect(html).not.toMatch(/\b(?:src|xlink:href|action|poster|srcset|data)\s*=\s*["']?\s*(?:https?:)?\/\//i);
    expect(html).not.toMatch(/url\(|@import/i);
    // A link leaves the page only for an item's own page, as the warehouse has its address.
    const itemUrls = new Set((await queryWarehouse(dataDir, 'SELECT url FROM items WHERE url IS NOT NULL')).rows.map((row) => String(row.url)));
    const links = [...html.matchAll(/\b(?:src|href)\s*=\s*"([^"]*)"/gi)].map((match) => match[1]!);
    for (const link of links) if (!/^(#|data:)/.test(link)) expect(itemUrls).toContain(link);
    // Nor does any other text on the page hold a web address.
    const urls = [...html.matchAll(/https?:\/\/[^\s"'<>]+/gi)].map((match) => match[0]);
    expect(urls.length).toBeGreaterThan(0);
    expect(urls.filter((url) => !links.includes(url))).toEqual([]);
    // The charts are plain SVG: no link, no URL, no namespace declaration pointing at one.
    const charts = html.match(/<svg[\s\S]*?<\/svg>/g)!;
    expect(charts.length).toBeGreaterThanOrEqual(REPORT_SECTIONS.length);
    for (const chart of charts) expect(chart).not.toMatch(/https?:|href|xmlns|url\(|<a[\s>]|<image|<foreignObject/i);
    expect(html).toContain(`content="default-src 'none'; style-src 'unsafe-inline'; img-src data:"`);
  });

  it('the command writes the page where --out says, and says where; --help has an example', async () => {
    const out = join(dataDir, 'reports', 'today.html');
    const previous = process.env.HARVESTER_DATA_DIR;
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      process.env.HARVESTER_DATA_DIR = dataDir;
      // Not asking Temporal: whatever listens at its default address is no test's.
      await reportCommand().parseAsync(['--out', out, '--no-temporal'], { from: 'user' });
      expect(stderr.mock.calls.map((call) => String(call[0])).join('')).toContain(`wrote the report to ${out}`);
    } finally {
      stderr.mockRestore();
      if (previous === undefined) delete process.env.HARVESTER_DATA_DIR;
      else process.env.HARVESTER_DATA_DIR = previous;
    }
    const written = readFileSync(out, 'utf8');
    for (const { id } of REPORT_SECTIONS) sectionOf(written, id);
    let help = '';
    const command = reportCommand().configureOutput({ writeOut: (text) => (help += text) });
    command.outputHelp();
    expect(help).toContain('--out <file>');
    expect(help).toMatch(/\(default:\s+"report\.html"\)/);
    expect(help).toMatch(/Example:\n\s+\$ harvester report --out/);
    // It reads the lake (the warehouse was one DuckDB file once).
    expect(help).toContain('<data dir>/lake');
    expect(help).not.toContain('warehouse.duckdb');
  });
});

describe('harvester report on an empty warehouse', () => {
  it('renders every section with a note instead of a chart', async () => {
    const empty = temporaryDir('report-empty-');
    await loadLandings(empty);
    const page = await renderReport(await loadReportData(empty));
    for (const { id } of REPORT_SECTIONS) expect(sectionOf(page, id)).toContain('<p class="empty">');
    expect(sectionOf(page, 'account-followers')).toContain('No account observations yet: set <code>track: { accounts: true }</code> in a harvest');
    expect(page).not.toContain('<svg');
  });
});

describe('harvester report on another warehouse, with other harvests', () => {
  it('gives a harvest the colour it has in the first report, and lists every failed run with a reason, budget-exhausted ones too', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'report-other-'));
    try {
      // Two harvests named before "trending": taken in sorted order, trending's colour would move.
      await new LocalStore(dir).writeLanding(failedRun('run-o1', 'trending', 'completed', 3, { credits_spent: 30, budget_credits: 500, items_landed: 9 }));
      await new LocalStore(dir).writeLanding(failedRun('run-o2', 'basil', 'completed', 2, { credits_spent: 30, budget_credits: 500, items_landed: 7 }));
      await new LocalStore(dir).writeLanding(failedRun('run-o3', 'amber', 'budget_exhausted', 1, { credits_spent: 500, budget_credits: 500, items_landed: 4 }));
      await loadLandings(dir);
      const other = await renderReport(await loadReportData(dir));
      const colorOf = (page: string, harvest: string) => marks(sectionOf(page, 'items-landed'), 'bar').find((mark) => mark.label.includes(` of harvest ${harvest},`))!.color;
      expect(colorOf(other, 'trending')).toBe(colorOf(html, 'trending'));
      expect(new Set(['trending', 'basil', 'amber'].map((harvest) => colorOf(other, harvest))).size).toBe(3);
      // The budget-exhausted run recorded no error: the report says why it stopped.
      expect(sectionOf(other, 'failures')).toMatch(/<td class="id">run-o3<\/td>[\s\S]*?<td class="error">the budget ran out before every target was done: 500 of 500 credits spent<\/td>/);
      expect(sectionOf(other, 'failures')).not.toContain('<td class="error">—</td>');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('harvester report on a warehouse with enrichment coverage', () => {
  it('shows it per enrichment, bought and why not, before the failures', async () => {
    const dir = temporaryDir('report-coverage-');
    await loadLandings(dir);
    const withTable = async (ddl: string, rows: string[]) => {
      const db = await openLake(dir, 'write');
      try {
        // A table of chosen rows in the view's place.
        await db.connection.run('DROP VIEW IF EXISTS enrichment_coverage');
        await db.connection.run(ddl);
        for (const row of rows) await db.connection.run(`INSERT INTO enrichment_coverage VALUES ${row}`);
      } finally {
        await db.close();
      }
      return renderReport(await loadReportData(dir));
    };
    const bought = (item: string, enrichment: string) => `('tiktok', '${item}', '${enrichment}', TIMESTAMPTZ '2025-01-01 00:00:00+00', 'run-a', 'req-${item}', NULL)`;
    const notBought = (item: string, enrichment: string, why: string) => `('tiktok', '${item}', '${enrichment}', NULL, NULL, NULL, '${why}')`;
    const page = await withTable('CREATE TABLE enrichment_coverage (platform VARCHAR, item_id VARCHAR, enrichment VARCHAR, bought_at TIMESTAMPTZ, run_id VARCHAR, request_id VARCHAR, why_not VARCHAR)', [
      bought('1', 'comments'),
      bought('2', 'comments'),
      bought('3', 'comments'),
      notBought('4', 'comments', 'budget'),
      notBought('5', 'comments', 'budget'),
      notBought('6', 'comments', 'refused'),
      bought('1', 'transcript'),
      notBought('2', 'transcript', 'unavailable'),
    ]);
    const markup = sectionOf(page, 'enrichment-coverage');
    expect(markup).toContain('<td>comments</td>\n<td class="num">6</td>\n<td class="num">3</td>\n<td class="num">50.00%</td>\n<td>budget: 2 · refused: 1</td>');
    expect(markup).toContain('<td>transcript</td>\n<td class="num">2</td>\n<td class="num">1</td>\n<td class="num">50.00%</td>\n<td>unavailable: 1</td>');
    expect(page).toContain('<a href="#enrichment-coverage">Enrichment coverage</a>');
    expect(page.indexOf('id="enrichment-coverage"')).toBeLessThan(page.indexOf('id="failures"'));
  });
});

/** The boxes of a chart's text labels (a text mark's), from the SVG: 0.6 em a character wide (as the report measures text) and 1 em high. */
function labelBoxes(svg: string): { text: string; left: number; right: number; top: number; bottom: number }[] {
  const group = /<g class="mark-text role-mark[^"]*"[^>]*>([\s\S]*?)<\/g>/.exec(svg)![1]!;
  return [...group.matchAll(/<text [^>]*transform="translate\(([-\d.]+),([-\d.]+)\)"[^>]*font-size="(\d+)px"[^>]*>([^<]*)<\/text>/g)].map(([, x, y, size, text]) => ({
    text: text!,
    left: Number(x),
    right: Number(x) + text!.length * Number(size) * 0.6,
    top: Number(y) - Number(size),
    bottom: Number(y),
  }));
}
const overlaps = (boxes: ReturnType<typeof labelBoxes>) =>
  boxes.flatMap((a, index) => boxes.slice(index + 1).filter((b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom).map((b) => `${a.text} and ${b.text}`));

describe('charts', () => {
  it('a trend chart keeps the labels at its lines\' ends apart, however close the ends are; a series of one observation is a point', async () => {
    const colors = { title: 'harvest', colors: new Map([['a', '#111111'], ['b', '#222222']]) };
    const start = Date.UTC(2026, 0, 1);
    // Ten series: #1 and #2 observed twice, the rest once, #5 to #10 at the same time and nearly the same views.
    const points = Array.from({ length: 10 }, (_, index) => index + 1).flatMap((rank) => {
      const value = rank <= 4 ? 1_000_000 - rank * 1000 : 5_000 - rank;
      const last = { series: String(rank), label: `#${rank}`, at: start + (rank <= 4 ? rank * 3_600_000 : 0), value, harvest: 'a', description: `#${rank} last: ${value}` };
      return rank <= 2 ? [{ ...last, at: start - 86_400_000, value: 10_000, harvest: 'b', description: `#${rank} first: 10000` }, last] : [last];
    });
    const svg = await renderChart(trendChart({ title: 't', yTitle: 'views', points, color: colors, width: 580 }), 'trend');
    const boxes = labelBoxes(svg);
    expect(boxes.map((box) => box.text).sort()).toEqual(points.filter((point) => point.description.includes(' last: ')).map((point) => point.label).sort());
    expect(overlaps(boxes)).toEqual([]);
    // Every observation is a point, the single ones too.
    expect(labels(svg, 'circle').sort()).toEqual(points.map((point) => point.description).sort());
  });

  it('spreads labels at least a label apart, each as near its value as that allows, within the plot where they fit', () => {
    const placed = spreadLabels([50, 50, 50, 10, 90], [0, 100], 300, 13);
    const pixels = placed.map((value) => ((100 - value) / 100) * 300);
    const sorted = [...pixels].sort((a, b) => a - b);
    for (let index = 1; index < sorted.length; index++) expect(sorted[index]! - sorted[index - 1]!).toBeGreaterThanOrEqual(13 - 1e-9);
    // The lone ones stay where they are; the three at 50 share the room around it.
    expect(placed[3]).toBeCloseTo(10, 9);
    expect(placed[4]).toBeCloseTo(90, 9);
    expect(Math.min(...pixels.slice(0, 3))).toBeCloseTo(150, 9);
    // Labels that crowd the bottom edge are moved up, not off the plot.
    expect(Math.max(...spreadLabels([0, 0, 0], [0, 100], 300, 13).map((value) => ((100 - value) / 100) * 300))).toBeCloseTo(300, 9);
  });

  /** The texts of a chart's y axis labels (or x, for horizontal bars), top to bottom or left to right. */
  const axisLabels = (svg: string, axis: 'X' | 'Y') => {
    const group = new RegExp(`aria-label="${axis}-axis[^"]*"[\\s\\S]*?role-axis-label[^>]*>([\\s\\S]*?)</g>`).exec(svg)![1]!;
    return [...group.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((match) => match[1]);
  };
  const colors = { title: 'series', colors: new Map([['a', '#111111'], ['b', '#222222']]) };

  it('draw a bar per value above zero, a point per value (zeros too), and round ticks', async () => {
    const values = { a: [1, 0, 3], b: [2, 2, 0] };
    const segments = Object.entries(values).flatMap(([series, counts]) => counts.map((value, index) => ({ column: `d${index + 1}`, series, value, description: `${series} d${index + 1}: ${value}` })));
    const stacked = await renderChart(columnChart({ title: 't', yTitle: 'y', columns: ['d1', 'd2', 'd3'], labels: new Map(), segments, color: colors }), 'bar');
    expect(labels(stacked, 'bar').sort()).toEqual(['a d1: 1', 'a d3: 3', 'b d1: 2', 'b d2: 2']);
    // Counts below the tick count get one tick per whole number.
    expect(axisLabels(stacked, 'Y')).toEqual(['0', '1', '2', '3']);

    const points = await renderChart(dailyLineChart({ title: 't', yTitle: 'y', points: segments.map(({ column, ...rest }) => ({ day: column, ...rest })), color: colors }), 'line');
    expect(labels(points, 'point')).toEqual(segments.map((segment) => segment.description));

    const hbar = await renderChart(
      horizontalBarChart({ title: 't', xTitle: 'x', bars: [{ label: 'x', value: 87, valueText: '87', description: 'x: 87', color: '#111111' }, { label: 'y', value: 0, valueText: '0', description: 'y: 0', color: '#111111' }] }),
      'hbar',
    );
    expect(bars(hbar)).toEqual([87]);
    const ticks = axisLabels(hbar, 'X').map(Number);
    const step = ticks[1]! - ticks[0]!;
    expect(ticks[0]).toBe(0);
    expect([1, 2, 5, 10, 20, 50]).toContain(step);
    expect(ticks.every((tick, index) => tick === index * step)).toBe(true);
    expect(ticks.at(-1)).toBeGreaterThanOrEqual(87);

    // Large values read with SI prefixes.
    const large = await renderChart(
      horizontalBarChart({ title: 't', xTitle: 'x', bars: [{ label: 'x', value: 2_500_000, valueText: '2,500,000', description: 'x: 2,500,000', color: '#111111' }] }),
      'hbar',
    );
    expect(axisLabels(large, 'X')).toContain('2M');
    // A harvest's colour comes from its name: the same whichever harvests share the report.
    const few = harvestColors(['b', 'a', 'b']);
    expect([...few.keys()]).toEqual(['a', 'b']);
    expect([...few.values()].every((color) => (HARVEST_PALETTE as readonly string[]).includes(color))).toBe(true);
    for (const name of ['a', 'b']) expect(harvestColors([name]).get(name)).toBe(few.get(name));
    for (const name of ['sample', 'trending', 'tracked', 'demo']) expect(harvestColors(['sample', 'trending', 'tracked', 'demo']).get(name)).toBe(harvestColors([name]).get(name));
    // Two names on one palette entry: both shown, in different colours.
    const names = Array.from({ length: 40 }, (_, index) => `h${index}`);
    const clash = names.flatMap((first) => names.filter((second) => second > first && harvestColors([first]).get(first) === harvestColors([second]).get(second)).map((second) => [first, second] as const))[0]!;
    expect(new Set(harvestColors(clash).values()).size).toBe(2);
  });
});

/** One message of the DevTools protocol: a command's answer (with its id) or an event. */
interface DevToolsMessage {
  id?: number;
  method?: string;
  sessionId?: string;
  params?: Record<string, unknown>;
  result?: Record<string, unknown>;
  error?: { message: string };
}

/**
 * Headless Chromium screenshots a page; its console comes back as lines. The build setup unpacks
 * (from @sparticuz/chromium) has no --screenshot switch, so this speaks the DevTools protocol to it
 * over --remote-debugging-pipe: JSON messages, each ended by a NUL byte, written to the browser's
 * fd 3 and read from its fd 4. The console is collected twice: as protocol events (console calls,
 * uncaught exceptions, the browser's own log entries such as CSP violations) and as the
 * `:CONSOLE` lines Chromium logs to stderr.
 */
/** What a test asks of the loaded page besides its screenshot: sections shot alone, and an expression's value. */
interface PageLook {
  /** Section ids: each is shot alone, clipped to its box, into `<png without .png>-<id>.png`. */
  sections?: readonly string[];
  /** Evaluated in the page through DevTools (CSP does not stop it: no script of the page's runs); its value comes back as JSON. */
  evaluate?: string;
}

async function screenshot(page: string, png: string, look: PageLook = {}): Promise<{ lines: string[]; value: unknown; sections: Map<string, string> }> {
  const profile = join(page, '..', `profile-${Date.now()}`);
  const child = spawn(
    CHROMIUM,
    [
      '--headless',
      '--disable-gpu',
      '--no-sandbox',
      '--no-first-run',
      '--no-default-browser-check',
      '--disable-dev-shm-usage',
      '--hide-scrollbars',
      `--user-data-dir=${profile}`,
      '--window-size=1280,2000',
      '--enable-logging=stderr',
      '--v=0',
      '--remote-debugging-pipe',
      'about:blank',
    ],
    // HOME too, so nothing the browser might keep per user lands outside the test's folder.
    { stdio: ['ignore', 'pipe', 'pipe', 'pipe', 'pipe'], env: { ...process.env, HOME: profile } },
  );
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const commands = child.stdio[3] as Writable;
  const answers = child.stdio[4] as Readable;
  // A write after the browser died fails with EPIPE; the close handler below reports that instead.
  commands.on('error', () => {});
  const waiting = new Map<number, { resolve: (result: Record<string, unknown>) => void; reject: (error: Error) => void }>();
  const failAll = (error: Error) => {
    for (const { reject } of waiting.values()) reject(error);
    waiting.clear();
  };
  const exited = new Promise<number | null>((resolve) =>
    child.on('close', (code) => {
      failAll(new Error(`Chromium exited (${code}) before answering:\n${output}`));
      resolve(code);
    }),
  );
  // Rejects once the browser is gone, so nothing below waits on a dead one.
  const died = exited.then((code) => Promise.reject(new Error(`Chromium exited (${code}) before the page loaded:\n${output}`)));
  died.catch(() => {});
  const timer = setTimeout(() => {
    failAll(new Error(`Chromium did not finish in 50 s:\n${output}`));
    child.kill('SIGKILL');
  }, 50_000);

  const listeners: ((message: DevToolsMessage) => void)[] = [];
  let buffered = '';
  answers.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk;
    for (let end = buffered.indexOf('\0'); end >= 0; end = buffered.indexOf('\0')) {
      const message = JSON.parse(buffered.slice(0, end)) as DevToolsMessage;
      buffered = buffered.slice(end + 1);
      if (message.id === undefined) {
        for (const listener of listeners) listener(message);
        continue;
      }
      const waiter = waiting.get(message.id);
      waiting.delete(message.id);
      if (message.error) waiter?.reject(new Error(`DevTools: ${message.error.message}`));
      else waiter?.resolve(message.result ?? {});
    }
  });
  let nextId = 0;
  const send = (method: string, params: Record<string, unknown> = {}, sessionId?: string) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const id = ++nextId;
      waiting.set(id, { resolve, reject });
      commands.write(`${JSON.stringify({ id, method, params, sessionId })}\0`);
    });

  const messages: string[] = [];
  const sections = new Map<string, string>();
  let value: unknown;
  listeners.push(({ method, params }) => {
    if (method === 'Runtime.consoleAPICalled') {
      const { type, args } = params as { type: string; args: { value?: unknown; description?: string; type: string }[] };
      messages.push(`console.${type}: ${args.map((arg) => String(arg.value ?? arg.description ?? arg.type)).join(' ')}`);
    } else if (method === 'Runtime.exceptionThrown') {
      const { exceptionDetails } = params as { exceptionDetails: { text: string; exception?: { description?: string } } };
      messages.push(`${exceptionDetails.text} ${exceptionDetails.exception?.description ?? ''}`);
    } else if (method === 'Log.entryAdded') {
      const { entry } = params as { entry: { source: string; level: string; text: string } };
      messages.push(`${entry.source} ${entry.level}: ${entry.text}`);
    }
  });
  try {
    const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
    const { sessionId } = (await send('Target.attachToTarget', { targetId, flatten: true })) as { sessionId: string };
    for (const domain of ['Runtime', 'Log', 'Page']) await send(`${domain}.enable`, {}, sessionId);
    const loaded = new Promise<void>((resolve) => listeners.push((message) => message.method === 'Page.loadEventFired' && message.sessionId === sessionId && resolve()));
    const navigation = await send('Page.navigate', { url: pathToFileURL(page).href }, sessionId);
    expect(navigation.errorText, `navigating to ${page}`).toBeUndefined();
    await Promise.race([loaded, died]);
    const { data } = (await send('Page.captureScreenshot', { format: 'png' }, sessionId)) as { data: string };
    writeFileSync(png, Buffer.from(data, 'base64'));
    for (const id of look.sections ?? []) {
      const box = (await send('Runtime.evaluate', { expression: `JSON.stringify((({ x, y, width, height }) => ({ x, y: y + scrollY, width, height }))(document.getElementById(${JSON.stringify(id)}).getBoundingClientRect()))`, returnByValue: true }, sessionId)) as { result: { value: string } };
      const clip = { ...(JSON.parse(box.result.value) as { x: number; y: number; width: number; height: number }), scale: 1 };
      const shot = (await send('Page.captureScreenshot', { format: 'png', clip, captureBeyondViewport: true }, sessionId)) as { data: string };
      const file = png.replace(/\.png$/, `-${id}.png`);
      writeFileSync(file, Buffer.from(shot.data, 'base64'));
      sections.set(id, file);
    }
    if (look.evaluate !== undefined) {
      const evaluated = (await send('Runtime.evaluate', { expression: `JSON.stringify(${look.evaluate})`, returnByValue: true }, sessionId)) as { result: { value?: string }; exceptionDetails?: { text: string } };
      expect(evaluated.exceptionDetails, look.evaluate).toBeUndefined();
      value = JSON.parse(evaluated.result.value ?? 'null');
    }
    commands.write(`${JSON.stringify({ id: ++nextId, method: 'Browser.close' })}\0`);
    expect(await exited, output).toBe(0);
  } finally {
    clearTimeout(timer);
    child.kill('SIGKILL');
  }
  return { lines: [...messages, ...output.split('\n').filter((line) => /:CONSOLE[:(]/.test(line) || /Uncaught|console\.error/.test(line))], value, sections };
}

describe('the report in a browser', () => {
  it('renders in headless Chromium with no console messages at all', { timeout: 120_000 }, async () => {
    expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: run \`npm run setup -- --for-tests\``).toBe(true);
    const dir = temporaryDir('report-browser-');
    // A control page first, so a quiet console below means a clean page, not a deaf logger.
    const control = join(dir, 'control.html');
    writeFileSync(control, '<!DOCTYPE html><title>control</title><script>console.error("control-error"); missingFunction();</script>');
    const { lines: controlLines } = await screenshot(control, join(dir, 'control.png'));
    expect(controlLines.join('\n')).toContain('control-error');
    expect(controlLines.join('\n')).toContain('Uncaught ReferenceError');

    const page = join(dir, 'report.html');
    writeFileSync(page, html);
    const png = join(dir, 'report.png');
    // Each chart's section shot alone too, and, as the browser lays them out, the boxes of the
    // labels at the ends of the "Views over time" lines and the legend of the engagement chart.
    const charted = REPORT_SECTIONS.map((entry) => entry.id);
    const { lines, value, sections } = await screenshot(page, png, {
      sections: charted,
      evaluate: `({
        viewLabels: [...document.querySelectorAll('#item-views svg g.mark-text.role-mark text')].map((text) => { const box = text.getBoundingClientRect(); return { text: text.textContent, left: box.left, right: box.right, top: box.top, bottom: box.bottom }; }),
        engagementLegend: [...document.querySelectorAll('#engagement svg .role-legend-label text')].map((text) => text.textContent),
      })`,
    });
    expect(lines).toEqual([]);
    for (const id of charted) {
      const shot = readFileSync(sections.get(id)!);
      expect(shot.subarray(1, 4).toString(), id).toBe('PNG');
      // Wider than the page's margins and taller than a heading: the section with its chart.
      expect(shot.readUInt32BE(16), id).toBeGreaterThan(600);
      expect(shot.readUInt32BE(20), id).toBeGreaterThan(150);
    }
    const { viewLabels, engagementLegend } = value as { viewLabels: { text: string; left: number; right: number; top: number; bottom: number }[]; engagementLegend: string[] };
    expect(viewLabels.map((label) => label.text).sort()).toEqual(data.topItems.map((item) => `#${item.rank}`).sort());
    const overlapping = viewLabels.flatMap((a, index) => viewLabels.slice(index + 1).filter((b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom).map((b) => `${a.text} and ${b.text}`));
    expect(overlapping).toEqual([]);
    expect(engagementLegend.sort()).toEqual([...new Set(data.topItems.map((item) => item.platform))].sort());
    const bytes = readFileSync(png);
    expect(bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))).toBe(true);
    expect(statSync(png).size).toBeGreaterThan(20 * 1024);
    // Width and height from the IHDR chunk: the window size asked for.
    expect([bytes.readUInt32BE(16), bytes.readUInt32BE(20)]).toEqual([1280, 2000]);
    if (process.env.REPORT_SCREENSHOT) writeFileSync(process.env.REPORT_SCREENSHOT, bytes);
  });
});
