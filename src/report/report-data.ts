/**
 * What the HTML report shows, read from the warehouse (the lake) through `queryWarehouse`
 * (read-only: the report never locks harvests or other readers out). Times are UTC throughout;
 * credits "over time" are per UTC day of `api_calls.called_at`, views and followers "over time"
 * are per observation (`observed_at`).
 */
import { lakeCatalogFile } from '../store/layout.js';
import { sqlString } from '../warehouse/duckdb.js';
import { withWarehouseQueries } from '../warehouse/query.js';

/** Run statuses the report counts as failures: the run stopped early or lost some targets. */
export const FAILURE_STATUSES = ['failed', 'completed_with_errors', 'paused', 'budget_exhausted'] as const;
export type FailureStatus = (typeof FAILURE_STATUSES)[number];

export interface ReportOptions {
  /** The generation time printed in the header (now by default). */
  now?: Date;
  /** Days shown in the credit charts, counted back from the latest day with calls. */
  maxDays?: number;
  /** Runs shown in the items-landed chart, the latest ones. */
  maxRuns?: number;
  /** Endpoints given their own series; the rest are summed as "other endpoints". */
  maxEndpoints?: number;
  /** Items in the fastest-growing list, and in the views-over-time and engagement charts. */
  topItems?: number;
  /** Accounts in the followers-over-time chart. */
  topAccounts?: number;
  /**
   * Growth is measured over intervals at least this long, so an item seen twice within one
   * harvest (seconds apart, same counts) does not hide its growth since the harvest before.
   */
  minGrowthHours?: number;
  /** Failed runs listed, the latest ones. */
  maxFailures?: number;
  /**
   * Runs that ended early that the caller found outside the warehouse (`harvester report` asks
   * Temporal): a run that failed before it recorded itself (a wrong key) has no row in
   * `harvest_runs`. Listed among the failures and counted with the runs; `unreachable` says why
   * none could be asked for.
   */
  unrecordedRuns?: { runs: readonly FailedRun[] } | { unreachable: string };
}

export const REPORT_DEFAULTS = { maxDays: 90, maxRuns: 60, maxEndpoints: 8, topItems: 10, topAccounts: 10, minGrowthHours: 0.25, maxFailures: 100 } as const;

/** The harvest named for a call or an observation whose run the warehouse does not know. */
export const NO_HARVEST = '(no harvest)';

export interface ReportTotals {
  credits: number;
  apiCalls: number;
  runs: number;
  harvests: number;
  items: number;
  itemObservations: number;
  itemsLanded: number;
  failedRuns: number;
  /** First and latest billed call, `YYYY-MM-DD HH:MM` UTC, or null without calls. */
  firstCallAt: string | null;
  lastCallAt: string | null;
}

/**
 * Values per day and per series; days are consecutive `YYYY-MM-DD`. A day on which a series had
 * no rows is null, not 0: a harvest that made no call that day spent nothing, but it is a gap
 * between its runs, not a day it was charged 0 (a chart draws it as a break in the line).
 */
export interface DailySeries {
  days: string[];
  series: { name: string; values: (number | null)[]; total: number }[];
  /** Days before the first shown that had calls, left out to keep the chart readable. */
  omittedDays: number;
  /** Credits on the omitted days. */
  omittedCredits: number;
}

export interface RunPoint {
  runId: string;
  harvest: string;
  status: string;
  /** `YYYY-MM-DD HH:MM` UTC. */
  startedAt: string;
  itemsLanded: number;
  creditsSpent: number;
}

export interface GrowthItem {
  platform: string;
  itemId: string;
  kind: string | null;
  authorHandle: string | null;
  caption: string | null;
  url: string | null;
  /** Views gained over the interval, and its length. */
  viewsGained: number;
  hours: number;
  viewsPerHour: number;
  /** Views at the item's newest observation (latest_item_metrics), and when that was. */
  latestViews: number | null;
  observedAt: string;
}

/** One reading of an item's or account's metric, by a run of `harvest`. */
export interface Observation {
  /** When: epoch milliseconds, and `YYYY-MM-DD HH:MM` UTC. */
  at: number;
  observedAt: string;
  value: number;
  harvest: string;
}

/** An item among those with the most views at their latest observation. */
export interface TopItem {
  rank: number;
  platform: string;
  itemId: string;
  kind: string | null;
  authorHandle: string | null;
  caption: string | null;
  url: string | null;
  /** Counts at the latest observation (latest_item_metrics). */
  views: number;
  likes: number | null;
  comments: number | null;
  shares: number | null;
  /** (likes + comments + shares) / views at the latest observation; a count not reported is left out; null without views or counts. */
  engagementRate: number | null;
  /** Its views at each observation in the shown window, oldest first. */
  observations: Observation[];
}

/** An account among those with the most followers at their latest observation. */
export interface TopAccount {
  rank: number;
  platform: string;
  handle: string;
  followers: number;
  /** Its followers at each observation in the shown window, oldest first. */
  observations: Observation[];
}

/** What a harvest paid per item it has observations of. */
export interface HarvestCost {
  harvest: string;
  credits: number;
  /** Distinct items observed (item_metrics) by the harvest's runs. */
  items: number;
  /** Null when the harvest observed no item. */
  creditsPerItem: number | null;
}

/** Enrichment coverage per enrichment, from the warehouse's `enrichment_coverage` view. */
export interface EnrichmentCoverage {
  enrichments: { enrichment: string; items: number; bought: number; notBought: { reason: string; items: number }[] }[];
}

export interface FailedRun {
  runId: string;
  harvest: string;
  status: string;
  startedAt: string;
  finishedAt: string | null;
  budgetCredits: number | null;
  creditsSpent: number | null;
  itemsLanded: number | null;
  error: string | null;
  /** False for a run the warehouse has no row of (found in Temporal). */
  recorded?: boolean;
}

export interface ReportData {
  /** ISO 8601. */
  generatedAt: string;
  warehousePath: string;
  totals: ReportTotals;
  creditsByHarvest: DailySeries;
  creditsByEndpoint: DailySeries;
  /** The latest runs, oldest first. */
  runs: RunPoint[];
  topGrowth: GrowthItem[];
  /** Every harvest the report shows (in credits, runs, costs or observations), sorted: the harvest colours' domain. */
  harvests: string[];
  /** The items with the most views now, most first, with their views over time. */
  topItems: TopItem[];
  /** The accounts with the most followers now, most first, with their followers over time. */
  topAccounts: TopAccount[];
  /** Credits per item observed, per harvest, in harvest name order. */
  costPerItem: HarvestCost[];
  /** Null for a warehouse not loaded since the `enrichment_coverage` view came (its next load makes it). */
  enrichmentCoverage: EnrichmentCoverage | null;
  /** Counts for each failure status present, in FAILURE_STATUSES order. */
  failureCounts: { status: string; runs: number }[];
  /** The latest failed runs, newest first, the ones outside the warehouse too (recorded: false). */
  failures: FailedRun[];
  /** Why runs outside the warehouse could not be looked for (Temporal unreachable), if they could not. */
  unrecordedRunsUnknown: string | null;
  /** The options the data was gathered with. */
  settings: Required<Omit<ReportOptions, 'now' | 'unrecordedRuns'>>;
}

const MINUTE = "'%Y-%m-%d %H:%M'";
/** A TIMESTAMPTZ as UTC text, whatever the session's time zone. */
const utc = (column: string, format = MINUTE) => `strftime(timezone('UTC', ${column}), ${format})`;
const FAILURE_LIST = FAILURE_STATUSES.map((status) => `'${status}'`).join(', ');
/**
 * Each run's harvest, for rows that carry only a run id: from the run's row, or from its calls
 * while the run's own landing is not loaded yet.
 */
const RUN_HARVEST_CTE = `run_harvest AS (
  SELECT run_id, min(harvest) AS harvest
  FROM (SELECT run_id, harvest FROM harvest_runs UNION ALL SELECT run_id, harvest FROM api_calls WHERE harvest IS NOT NULL)
  GROUP BY run_id)`;

function num(value: unknown): number {
  if (value === null || value === undefined) return 0;
  const parsed = Number(value);
  return Number.isFinite(parsed) ? parsed : 0;
}

function numOrNull(value: unknown): number | null {
  return value === null || value === undefined ? null : num(value);
}

function textOrNull(value: unknown): string | null {
  return value === null || value === undefined ? null : String(value);
}

/** Consecutive UTC days from `first` to `last`, inclusive. */
export function dayRange(first: string, last: string): string[] {
  const days: string[] = [];
  const end = Date.parse(`${last}T00:00:00Z`);
  for (let at = Date.parse(`${first}T00:00:00Z`); at <= end; at += 86_400_000) days.push(new Date(at).toISOString().slice(0, 10));
  return days;
}

/**
 * Pivots (day, key, value) rows into dense daily series, the largest series first; past
 * `maxSeries` the smaller ones are summed into one series named `otherName`.
 */
export function dailySeries(rows: { day: string; key: string; value: number }[], options: { maxDays: number; maxSeries?: number; otherName?: string }): DailySeries {
  if (rows.length === 0) return { days: [], series: [], omittedDays: 0, omittedCredits: 0 };
  const allDays = dayRange(rows.reduce((min, row) => (row.day < min ? row.day : min), rows[0]!.day), rows.reduce((max, row) => (row.day > max ? row.day : max), rows[0]!.day));
  const days = allDays.slice(Math.max(0, allDays.length - options.maxDays));
  const index = new Map(days.map((day, position) => [day, position]));
  let omittedCredits = 0;
  const omitted = new Set<string>();
  const byKey = new Map<string, (number | null)[]>();
  for (const row of rows) {
    const position = index.get(row.day);
    if (position === undefined) {
      omittedCredits += row.value;
      omitted.add(row.day);
      continue;
    }
    let values = byKey.get(row.key);
    if (!values) byKey.set(row.key, (values = days.map(() => null)));
    values[position] = (values[position] ?? 0) + row.value;
  }
  const total = (values: (number | null)[]) => values.reduce<number>((sum, value) => sum + (value ?? 0), 0);
  let series = [...byKey.entries()].map(([name, values]) => ({ name, values, total: total(values) })).sort((a, b) => b.total - a.total || a.name.localeCompare(b.name));
  if (options.maxSeries !== undefined && series.length > options.maxSeries) {
    const kept = series.slice(0, options.maxSeries - 1);
    const rest = series.slice(options.maxSeries - 1);
    // A day is a gap of the summed series only when it is a gap of every series in it.
    const values = days.map((_, position) => rest.reduce<number | null>((sum, entry) => (entry.values[position] === null ? sum : (sum ?? 0) + entry.values[position]!), null));
    series = [...kept, { name: options.otherName ?? 'other', values, total: total(values) }];
  }
  return { days, series, omittedDays: omitted.size, omittedCredits };
}

/** The rows of a query of the warehouse, on the report's one connection to it. */
type Rows = (sql: string) => Promise<Record<string, unknown>[]>;

/** Everything the report shows, from the warehouse under `dataDir`. */
export async function loadReportData(dataDir: string, options: ReportOptions = {}): Promise<ReportData> {
  const settings = {
    maxDays: options.maxDays ?? REPORT_DEFAULTS.maxDays,
    maxRuns: options.maxRuns ?? REPORT_DEFAULTS.maxRuns,
    maxEndpoints: options.maxEndpoints ?? REPORT_DEFAULTS.maxEndpoints,
    topItems: options.topItems ?? REPORT_DEFAULTS.topItems,
    topAccounts: options.topAccounts ?? REPORT_DEFAULTS.topAccounts,
    minGrowthHours: options.minGrowthHours ?? REPORT_DEFAULTS.minGrowthHours,
    maxFailures: options.maxFailures ?? REPORT_DEFAULTS.maxFailures,
  };
  for (const [name, value] of Object.entries(settings)) {
    const valid = name === 'minGrowthHours' ? Number.isFinite(value) && value >= 0 : Number.isInteger(value) && value >= 1;
    if (!valid) throw new Error(`report option ${name} must be ${name === 'minGrowthHours' ? 'a number of at least 0' : 'a whole number of at least 1'}, not ${value}`);
  }
  const generatedAt = (options.now ?? new Date()).toISOString();
  const unrecorded = options.unrecordedRuns;
  return withWarehouseQueries(dataDir, async (query) => {
    const rows: Rows = async (sql) => (await query(sql)).rows;
    const data = await reportFrom(rows, dataDir, settings, generatedAt);
    if (unrecorded === undefined) return data;
    if ('unreachable' in unrecorded) return { ...data, unrecordedRunsUnknown: unrecorded.unreachable };
    if (unrecorded.runs.length === 0) return data;
    const recorded = await rows(`SELECT DISTINCT run_id FROM harvest_runs WHERE run_id IN (${unrecorded.runs.map((run) => sqlString(run.runId)).join(', ')})`);
    return withUnrecordedRuns(data, unrecorded.runs, new Set(recorded.map((row) => String(row.run_id))));
  });
}

/**
 * The report with the runs the warehouse has no row of among its failures and in its run counts;
 * a run it has (`recorded`, by run id) is left as the warehouse tells it.
 */
function withUnrecordedRuns(data: ReportData, runs: readonly FailedRun[], recorded: ReadonlySet<string>): ReportData {
  const added = runs.filter((run) => !recorded.has(run.runId)).map((run) => ({ ...run, recorded: false }));
  if (added.length === 0) return data;
  const failures = [...data.failures, ...added].sort((a, b) => b.startedAt.localeCompare(a.startedAt) || a.runId.localeCompare(b.runId)).slice(0, data.settings.maxFailures);
  const counts = new Map(data.failureCounts.map((entry) => [entry.status, entry.runs]));
  for (const run of added) counts.set(run.status, (counts.get(run.status) ?? 0) + 1);
  const order = [...FAILURE_STATUSES, ...[...counts.keys()].filter((status) => !(FAILURE_STATUSES as readonly string[]).includes(status)).sort()];
  return {
    ...data,
    totals: { ...data.totals, runs: data.totals.runs + added.length, failedRuns: data.totals.failedRuns + added.length },
    failureCounts: order.flatMap((status) => (counts.has(status) ? [{ status, runs: counts.get(status)! }] : [])),
    failures,
  };
}

/** The report's data, read with `rows`. */
async function reportFrom(rows: Rows, dataDir: string, settings: Record<keyof typeof REPORT_DEFAULTS, number>, generatedAt: string): Promise<ReportData> {

  const [totalsRow] = await rows(`SELECT
       (SELECT count(*) FROM api_calls) AS api_calls,
       (SELECT coalesce(sum(credits), 0) FROM api_calls) AS credits,
       (SELECT count(*) FROM harvest_runs) AS runs,
       (SELECT count(DISTINCT harvest) FROM (SELECT harvest FROM harvest_runs UNION ALL SELECT harvest FROM api_calls)) AS harvests,
       (SELECT count(*) FROM items) AS items,
       (SELECT count(*) FROM item_metrics) AS item_observations,
       (SELECT coalesce(sum(items_landed), 0) FROM harvest_runs) AS items_landed,
       (SELECT count(*) FROM harvest_runs WHERE status IN (${FAILURE_LIST})) AS failed_runs,
       (SELECT ${utc('min(called_at)')} FROM api_calls) AS first_call,
       (SELECT ${utc('max(called_at)')} FROM api_calls) AS last_call`,
  );
  const totals: ReportTotals = {
    credits: num(totalsRow?.credits),
    apiCalls: num(totalsRow?.api_calls),
    runs: num(totalsRow?.runs),
    harvests: num(totalsRow?.harvests),
    items: num(totalsRow?.items),
    itemObservations: num(totalsRow?.item_observations),
    itemsLanded: num(totalsRow?.items_landed),
    failedRuns: num(totalsRow?.failed_runs),
    firstCallAt: textOrNull(totalsRow?.first_call),
    lastCallAt: textOrNull(totalsRow?.last_call),
  };

  // Each call carries its run's harvest; the run's row fills in for a call landed without one.
  const creditRows = await rows(`SELECT ${utc('c.called_at', "'%Y-%m-%d'")} AS day, coalesce(c.harvest, r.harvest, ${sqlString(NO_HARVEST)}) AS harvest, c.endpoint, sum(c.credits) AS credits
     FROM api_calls c LEFT JOIN harvest_runs r USING (run_id)
     GROUP BY ALL ORDER BY day, harvest, endpoint`,
  );
  const creditsByHarvest = dailySeries(
    creditRows.map((row) => ({ day: String(row.day), key: String(row.harvest), value: num(row.credits) })),
    { maxDays: settings.maxDays },
  );
  const creditsByEndpoint = dailySeries(
    creditRows.map((row) => ({ day: String(row.day), key: String(row.endpoint), value: num(row.credits) })),
    { maxDays: settings.maxDays, maxSeries: settings.maxEndpoints, otherName: 'other endpoints' },
  );

  const runs = (
    await rows(`SELECT run_id, harvest, status, ${utc('started_at')} AS started, items_landed, credits_spent
       FROM harvest_runs ORDER BY started_at DESC, run_id DESC LIMIT ${settings.maxRuns}`,
    )
  )
    .reverse()
    .map((row): RunPoint => ({
      runId: String(row.run_id),
      harvest: String(row.harvest),
      status: String(row.status),
      startedAt: String(row.started),
      itemsLanded: num(row.items_landed),
      creditsSpent: num(row.credits_spent),
    }));

  const topGrowth = (
    await rows(`WITH growth AS (
         SELECT platform, item_id, views_delta, hours_since_previous, views_delta / hours_since_previous AS views_per_hour
         FROM item_growth
         WHERE views_delta IS NOT NULL AND hours_since_previous >= ${Number(settings.minGrowthHours)} AND hours_since_previous > 0
         QUALIFY row_number() OVER (PARTITION BY platform, item_id ORDER BY observed_at DESC) = 1
       )
       SELECT g.platform, g.item_id, g.views_delta, g.hours_since_previous, g.views_per_hour,
         m.views AS latest_views, ${utc('m.observed_at')} AS observed, i.kind, i.author_handle, i.caption, i.url
       FROM growth g
       JOIN latest_item_metrics m USING (platform, item_id)
       LEFT JOIN items i USING (platform, item_id)
       WHERE g.views_per_hour > 0
       ORDER BY g.views_per_hour DESC, g.platform, g.item_id
       LIMIT ${settings.topItems}`,
    )
  ).map((row): GrowthItem => ({
    platform: String(row.platform),
    itemId: String(row.item_id),
    kind: textOrNull(row.kind),
    authorHandle: textOrNull(row.author_handle),
    caption: textOrNull(row.caption),
    url: textOrNull(row.url),
    viewsGained: num(row.views_delta),
    hours: num(row.hours_since_previous),
    viewsPerHour: num(row.views_per_hour),
    latestViews: numOrNull(row.latest_views),
    observedAt: String(row.observed),
  }));

  // The top items by views at their latest observation, each with its views over the shown days
  // (counted back from the latest observation of any item), one row per observation.
  const itemRows = await rows(`WITH ${RUN_HARVEST_CTE},
     top AS (
       SELECT platform, item_id, views, likes, comments, shares FROM latest_item_metrics
       WHERE views IS NOT NULL ORDER BY views DESC, platform, item_id LIMIT ${settings.topItems})
     SELECT t.platform, t.item_id, t.views AS latest_views, t.likes, t.comments, t.shares, i.kind, i.author_handle, i.caption, i.url,
       epoch_ms(m.observed_at) AS at, ${utc('m.observed_at')} AS observed, m.views, coalesce(h.harvest, ${sqlString(NO_HARVEST)}) AS harvest
     FROM top t
     LEFT JOIN items i ON i.platform = t.platform AND i.item_id = t.item_id
     LEFT JOIN item_metrics m ON m.platform = t.platform AND m.item_id = t.item_id AND m.views IS NOT NULL
       AND m.observed_at >= (SELECT max(observed_at) - to_days(${settings.maxDays}) FROM item_metrics)
     LEFT JOIN run_harvest h ON h.run_id = m.run_id
     ORDER BY t.views DESC, t.platform, t.item_id, m.observed_at, m.request_id`,
  );
  const topItems = seriesOf<TopItem>(
    itemRows,
    (item, row) => item.platform === row.platform && item.itemId === row.item_id,
    topItemFrom,
    'views',
  );

  // The same for accounts and their followers.
  const accountRows = await rows(`WITH ${RUN_HARVEST_CTE},
     top AS (
       SELECT platform, handle, followers FROM account_metrics WHERE followers IS NOT NULL
       QUALIFY row_number() OVER (PARTITION BY platform, handle ORDER BY observed_at DESC, request_id DESC) = 1
       ORDER BY followers DESC, platform, handle LIMIT ${settings.topAccounts})
     SELECT t.platform, t.handle, t.followers AS latest_followers,
       epoch_ms(m.observed_at) AS at, ${utc('m.observed_at')} AS observed, m.followers, coalesce(h.harvest, ${sqlString(NO_HARVEST)}) AS harvest
     FROM top t
     LEFT JOIN account_metrics m ON m.platform = t.platform AND m.handle = t.handle AND m.followers IS NOT NULL
       AND m.observed_at >= (SELECT max(observed_at) - to_days(${settings.maxDays}) FROM account_metrics)
     LEFT JOIN run_harvest h ON h.run_id = m.run_id
     ORDER BY t.followers DESC, t.platform, t.handle, m.observed_at, m.request_id`,
  );
  const topAccounts = seriesOf<TopAccount>(
    accountRows,
    (account, row) => account.platform === row.platform && account.handle === row.handle,
    (row, rank): TopAccount => ({ rank, platform: String(row.platform), handle: String(row.handle), followers: num(row.latest_followers), observations: [] }),
    'followers',
  );

  // Credits as the credit charts count them (all days), over the distinct items the harvest's runs observed.
  const costPerItem = (
    await rows(`WITH ${RUN_HARVEST_CTE},
       spent AS (
         SELECT coalesce(c.harvest, r.harvest, ${sqlString(NO_HARVEST)}) AS harvest, sum(c.credits) AS credits
         FROM api_calls c LEFT JOIN harvest_runs r USING (run_id) GROUP BY ALL),
       observed AS (
         SELECT coalesce(h.harvest, ${sqlString(NO_HARVEST)}) AS harvest, count(DISTINCT (m.platform, m.item_id)) AS items
         FROM item_metrics m LEFT JOIN run_harvest h USING (run_id) GROUP BY ALL)
       SELECT harvest, coalesce(s.credits, 0) AS credits, coalesce(o.items, 0) AS items
       FROM spent s FULL JOIN observed o USING (harvest) ORDER BY harvest`,
    )
  ).map((row): HarvestCost => {
    const [credits, items] = [num(row.credits), num(row.items)];
    return { harvest: String(row.harvest), credits, items, creditsPerItem: items > 0 ? credits / items : null };
  });

  const enrichmentCoverage = await loadEnrichmentCoverage(rows);

  const countRows = await rows(`SELECT status, count(*) AS runs FROM harvest_runs WHERE status IN (${FAILURE_LIST}) GROUP BY status`);
  const failureCounts = FAILURE_STATUSES.flatMap((status) => {
    const found = countRows.find((row) => row.status === status);
    return found ? [{ status, runs: num(found.runs) }] : [];
  });
  const failures = (
    await rows(`SELECT run_id, harvest, status, ${utc('started_at')} AS started, ${utc('finished_at')} AS finished, budget_credits, credits_spent, items_landed, error
       FROM harvest_runs WHERE status IN (${FAILURE_LIST})
       ORDER BY started_at DESC, run_id LIMIT ${settings.maxFailures}`,
    )
  ).map((row): FailedRun => ({
    runId: String(row.run_id),
    harvest: String(row.harvest),
    status: String(row.status),
    startedAt: String(row.started),
    finishedAt: textOrNull(row.finished),
    budgetCredits: numOrNull(row.budget_credits),
    creditsSpent: numOrNull(row.credits_spent),
    itemsLanded: numOrNull(row.items_landed),
    error: textOrNull(row.error) ?? unrecordedReason(String(row.status), numOrNull(row.credits_spent), numOrNull(row.budget_credits)),
  }));

  const harvests = [
    ...new Set([
      ...creditsByHarvest.series.map((entry) => entry.name),
      ...runs.map((run) => run.harvest),
      ...costPerItem.map((cost) => cost.harvest),
      ...[...topItems, ...topAccounts].flatMap((entry) => entry.observations.map((observation) => observation.harvest)),
    ]),
  ].sort();

  return {
    generatedAt,
    warehousePath: lakeCatalogFile(dataDir),
    totals,
    creditsByHarvest,
    creditsByEndpoint,
    runs,
    topGrowth,
    harvests,
    topItems,
    topAccounts,
    costPerItem,
    enrichmentCoverage,
    failureCounts,
    failures,
    unrecordedRunsUnknown: null,
    settings,
  };
}

/**
 * Why a run stopped, for one whose row records no error: a run whose targets each ran out of
 * budget records none (its status says it), and the report lists every failed run with a reason.
 */
export function unrecordedReason(status: string, creditsSpent: number | null, budgetCredits: number | null): string {
  if (status === 'budget_exhausted') {
    const spent = creditsSpent === null ? '' : `: ${creditsSpent}${budgetCredits === null ? '' : ` of ${budgetCredits}`} credits spent`;
    return `the budget ran out before every target was done${spent}`;
  }
  return `no reason recorded (status ${status})`;
}

/** A top item from the first row of its observations, which carries its latest counts. */
/**
 * Rows ordered by series, one per observation (none when the series has no observation), folded
 * into one series each, ranked in row order, with the observations of `value`.
 */
function seriesOf<S extends { observations: { at: number; observedAt: string; value: number; harvest: string }[] }>(
  rows: Record<string, unknown>[],
  sameSeries: (series: S, row: Record<string, unknown>) => boolean,
  seriesFrom: (row: Record<string, unknown>, rank: number) => S,
  value: string,
): S[] {
  const all: S[] = [];
  for (const row of rows) {
    const last = all.at(-1);
    const series = last !== undefined && sameSeries(last, row) ? last : seriesFrom(row, all.length + 1);
    if (series !== last) all.push(series);
    if (row.at !== null) series.observations.push({ at: num(row.at), observedAt: String(row.observed), value: num(row[value]), harvest: String(row.harvest) });
  }
  return all;
}

function topItemFrom(row: Record<string, unknown>, rank: number): TopItem {
  const [views, likes, comments, shares] = [num(row.latest_views), numOrNull(row.likes), numOrNull(row.comments), numOrNull(row.shares)];
  const reported = [likes, comments, shares].filter((count) => count !== null);
  return {
    rank,
    platform: String(row.platform),
    itemId: String(row.item_id),
    kind: textOrNull(row.kind),
    authorHandle: textOrNull(row.author_handle),
    caption: textOrNull(row.caption),
    url: textOrNull(row.url),
    views,
    likes,
    comments,
    shares,
    engagementRate: views > 0 && reported.length > 0 ? reported.reduce((total, count) => total + count, 0) / views : null,
    observations: [],
  };
}

/**
 * Enrichment coverage per enrichment: items bought, and the others by why not. A warehouse not
 * loaded since the view came has none: no such section (null).
 */
async function loadEnrichmentCoverage(rows: Rows): Promise<EnrichmentCoverage | null> {
  if ((await rows("SELECT 1 FROM information_schema.tables WHERE table_name = 'enrichment_coverage'")).length === 0) return null;
  const counted = await rows(`SELECT enrichment, bought_at IS NOT NULL AS bought, coalesce(CAST(why_not AS VARCHAR), 'not recorded') AS reason, count(*) AS items
     FROM enrichment_coverage GROUP BY ALL ORDER BY enrichment, bought DESC, items DESC, reason`,
  );
  const enrichments: EnrichmentCoverage['enrichments'] = [];
  for (const row of counted) {
    let entry = enrichments.at(-1);
    if (entry?.enrichment !== String(row.enrichment)) enrichments.push((entry = { enrichment: String(row.enrichment), items: 0, bought: 0, notBought: [] }));
    const items = num(row.items);
    entry.items += items;
    if (row.bought === true) entry.bought += items;
    else entry.notBought.push({ reason: String(row.reason), items });
  }
  return { enrichments };
}
