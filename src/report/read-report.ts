/**
 * Reading the report's data (report-data.ts) from the warehouse (the lake) through
 * `withWarehouseQueries`, read-only: the report never locks harvests or other readers out. Each
 * part of the report is one query; where an analyst view says it (`item_growth`,
 * `account_followers`, `latest_item_metrics`, `enrichment_coverage`), the report reads the view
 * rather than deriving it again, so the page and the analysts' SQL agree.
 */
import { RETRYABLE_STATUSES } from '../harvest/checkpoint.js';
import { sqlString } from '../warehouse/duckdb.js';
import { lakeLocation } from '../warehouse/lake.js';
import { withWarehouseQueries } from '../warehouse/query.js';
import {
  dailySeries,
  NO_HARVEST,
  REPORT_DEFAULTS,
  withUnrecordedRuns,
  unrecordedReason,
  type EnrichmentCoverage,
  type FailedRun,
  type GrowthItem,
  type HarvestCost,
  type ItemDescription,
  type ReportData,
  type ReportOptions,
  type ReportTotals,
  type RunPoint,
  type TopAccount,
  type TopItem,
} from './report-data.js';

/** The rows of a query of the warehouse, on the report's one connection to it. */
type Rows = (sql: string) => Promise<Record<string, unknown>[]>;
type Settings = ReportData['settings'];

const MINUTE = "'%Y-%m-%d %H:%M'";
/** A TIMESTAMPTZ as UTC text, whatever the session's time zone. */
const utc = (column: string, format = MINUTE) => `strftime(timezone('UTC', ${column}), ${format})`;
const FAILURE_LIST = RETRYABLE_STATUSES.map((status) => `'${status}'`).join(', ');
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

/** Everything the report shows, from the warehouse under `dataDir`. */
export async function loadReportData(dataDir: string, options: ReportOptions = {}): Promise<ReportData> {
  const settings = { ...REPORT_DEFAULTS } as Settings;
  for (const name of Object.keys(REPORT_DEFAULTS) as (keyof Settings)[]) {
    const value = options[name] ?? REPORT_DEFAULTS[name];
    if (!Number.isInteger(value) || value < 1) throw new Error(`report option ${name} must be a whole number of at least 1, not ${value}`);
    settings[name] = value;
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

/** The report's data, read with `rows`. */
async function reportFrom(rows: Rows, dataDir: string, settings: Settings, generatedAt: string): Promise<ReportData> {
  const { creditsByHarvest, creditsByEndpoint } = await readCredits(rows, settings);
  const runs = await readRuns(rows, settings);
  const topItems = await readTopItems(rows, settings);
  const topAccounts = await readTopAccounts(rows, settings);
  const costPerItem = await readCostPerItem(rows);
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
    warehousePath: lakeLocation(dataDir).description,
    totals: await readTotals(rows),
    creditsByHarvest,
    creditsByEndpoint,
    runs,
    topGrowth: await readTopGrowth(rows, settings),
    harvests,
    topItems,
    topAccounts,
    costPerItem,
    enrichmentCoverage: await readEnrichmentCoverage(rows),
    failureCounts: await readFailureCounts(rows),
    failures: await readFailures(rows, settings),
    unrecordedRunsUnknown: null,
    settings,
  };
}

async function readTotals(rows: Rows): Promise<ReportTotals> {
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
  return {
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
}

async function readCredits(rows: Rows, settings: Settings): Promise<Pick<ReportData, 'creditsByHarvest' | 'creditsByEndpoint'>> {
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
  return { creditsByHarvest, creditsByEndpoint };
}

async function readRuns(rows: Rows, settings: Settings): Promise<RunPoint[]> {
  return (
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
}

/** The items that gained views fastest over their latest interval, as `item_growth` measures it (its interval and freshness rules, not the report's). */
async function readTopGrowth(rows: Rows, settings: Settings): Promise<GrowthItem[]> {
  return (
    await rows(`WITH growth AS (
         SELECT platform, item_id, views_delta, hours_since_previous, views_delta / hours_since_previous AS views_per_hour
         FROM item_growth
         WHERE views_delta IS NOT NULL
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
    ...itemOf(row),
    viewsGained: num(row.views_delta),
    hours: num(row.hours_since_previous),
    viewsPerHour: num(row.views_per_hour),
    latestViews: numOrNull(row.latest_views),
    observedAt: String(row.observed),
  }));
}

/**
 * The shown observations of each of the `top t` entries, for seriesOf: its rows of `table` (as `o`)
 * that have a `value`, over the latest `maxDays` days observed (counted back from the latest
 * observation of any entry), each with the harvest whose run made it.
 */
function shownObservations(table: string, key: string, value: string, maxDays: number): { columns: string; joins: string } {
  return {
    columns: `epoch_ms(o.observed_at) AS at, ${utc('o.observed_at')} AS observed, o.${value}, coalesce(h.harvest, ${sqlString(NO_HARVEST)}) AS harvest`,
    joins: `LEFT JOIN ${table} o ON o.platform = t.platform AND o.${key} = t.${key} AND o.${value} IS NOT NULL
       AND o.observed_at >= (SELECT max(observed_at) - to_days(${maxDays}) FROM ${table})
     LEFT JOIN run_harvest h ON h.run_id = o.run_id`,
  };
}

async function readTopItems(rows: Rows, settings: Settings): Promise<TopItem[]> {
  // The top items by views at their latest observation, each with its views over the shown days,
  // one row per observation.
  const observations = shownObservations('item_metrics', 'item_id', 'views', settings.maxDays);
  const itemRows = await rows(`WITH ${RUN_HARVEST_CTE},
     top AS (
       SELECT platform, item_id, views, likes, comments, shares FROM latest_item_metrics
       WHERE views IS NOT NULL ORDER BY views DESC, platform, item_id LIMIT ${settings.topItems})
     SELECT t.platform, t.item_id, t.views AS latest_views, t.likes, t.comments, t.shares, i.kind, i.author_handle, i.caption, i.url, ${observations.columns}
     FROM top t
     LEFT JOIN items i ON i.platform = t.platform AND i.item_id = t.item_id
     ${observations.joins}
     ORDER BY t.views DESC, t.platform, t.item_id, o.observed_at, o.request_id`,
  );
  return seriesOf<TopItem>(
    itemRows,
    (item, row) => item.platform === row.platform && item.itemId === row.item_id,
    topItemFrom,
    'views',
  );
}

/**
 * The accounts with the most followers at their latest observation, each with its followers over
 * the shown days: `account_followers`, fresh observations only, as the analysts' view has them.
 */
async function readTopAccounts(rows: Rows, settings: Settings): Promise<TopAccount[]> {
  const observations = shownObservations('account_followers', 'handle', 'followers', settings.maxDays);
  const accountRows = await rows(`WITH ${RUN_HARVEST_CTE},
     top AS (
       SELECT platform, handle, followers FROM account_followers WHERE followers IS NOT NULL
       QUALIFY row_number() OVER (PARTITION BY platform, handle ORDER BY observed_at DESC, followers DESC) = 1
       ORDER BY followers DESC, platform, handle LIMIT ${settings.topAccounts})
     SELECT t.platform, t.handle, t.followers AS latest_followers, ${observations.columns}
     FROM top t
     ${observations.joins}
     ORDER BY t.followers DESC, t.platform, t.handle, o.observed_at, o.followers`,
  );
  return seriesOf<TopAccount>(
    accountRows,
    (account, row) => account.platform === row.platform && account.handle === row.handle,
    (row, rank): TopAccount => ({ rank, platform: String(row.platform), handle: String(row.handle), followers: num(row.latest_followers), observations: [] }),
    'followers',
  );
}

async function readCostPerItem(rows: Rows): Promise<HarvestCost[]> {
  // Credits as the credit charts count them (all days), over the distinct items the harvest's runs observed.
  return (
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
}

async function readFailureCounts(rows: Rows): Promise<ReportData['failureCounts']> {
  const countRows = await rows(`SELECT status, count(*) AS runs FROM harvest_runs WHERE status IN (${FAILURE_LIST}) GROUP BY status`);
  return RETRYABLE_STATUSES.flatMap((status) => {
    const found = countRows.find((row) => row.status === status);
    return found ? [{ status, runs: num(found.runs) }] : [];
  });
}

async function readFailures(rows: Rows, settings: Settings): Promise<FailedRun[]> {
  return (
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
}

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

/** An item as a row of `items` (joined to its metrics) describes it. */
function itemOf(row: Record<string, unknown>): ItemDescription {
  return {
    platform: String(row.platform),
    itemId: String(row.item_id),
    kind: textOrNull(row.kind),
    authorHandle: textOrNull(row.author_handle),
    caption: textOrNull(row.caption),
    url: textOrNull(row.url),
  };
}

/** A top item from the first row of its observations, which carries its latest counts. */
function topItemFrom(row: Record<string, unknown>, rank: number): TopItem {
  const [views, likes, comments, shares] = [num(row.latest_views), numOrNull(row.likes), numOrNull(row.comments), numOrNull(row.shares)];
  const reported = [likes, comments, shares].filter((count) => count !== null);
  return {
    rank,
    ...itemOf(row),
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
async function readEnrichmentCoverage(rows: Rows): Promise<EnrichmentCoverage | null> {
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
