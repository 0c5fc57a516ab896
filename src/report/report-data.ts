/**
 * What the HTML report shows: its data, and the shaping of it that needs no warehouse (daily
 * series, the runs found outside the warehouse). `read-report.ts` reads it from the warehouse.
 * Times are UTC throughout; credits "over time" are per UTC day of `api_calls.called_at`, views
 * and followers "over time" are per observation (`observed_at`).
 */
import type { ReportBudget } from './render-budgets.js';
import { RETRYABLE_STATUSES } from '../harvest/checkpoint.js';

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

export const REPORT_DEFAULTS = { maxDays: 90, maxRuns: 60, maxEndpoints: 8, topItems: 10, topAccounts: 10, maxFailures: 100 } as const;

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

/** An item, as the report names and links it. */
export interface ItemDescription {
  platform: string;
  itemId: string;
  kind: string | null;
  authorHandle: string | null;
  caption: string | null;
  url: string | null;
}

export interface GrowthItem extends ItemDescription {
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
export interface TopItem extends ItemDescription {
  rank: number;
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
  /** Where the lake is, as lakeLocation describes it: its catalog file in the data directory, or a shared catalog (no password) and its data's path. */
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
  /** Counts for each failure status present, in RETRYABLE_STATUSES order. */
  failureCounts: { status: string; runs: number }[];
  /** The latest failed runs, newest first, the ones outside the warehouse too (recorded: false). */
  failures: FailedRun[];
  /** Why runs outside the warehouse could not be looked for (Temporal unreachable), if they could not. */
  unrecordedRunsUnknown: string | null;
  /** The budgets across runs and their figures, when the report was given them (`harvester report` with a config that has budgets). */
  budgets?: ReportBudget[];
  /** The options the data was gathered with. */
  settings: Required<Omit<ReportOptions, 'now' | 'unrecordedRuns'>>;
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

/**
 * The report with the runs the warehouse has no row of among its failures and in its run counts;
 * a run it has (`recorded`, by run id) is left as the warehouse tells it.
 */
export function withUnrecordedRuns(data: ReportData, runs: readonly FailedRun[], recorded: ReadonlySet<string>): ReportData {
  const added = runs.filter((run) => !recorded.has(run.runId)).map((run) => ({ ...run, recorded: false }));
  if (added.length === 0) return data;
  const failures = [...data.failures, ...added].sort((a, b) => b.startedAt.localeCompare(a.startedAt) || a.runId.localeCompare(b.runId)).slice(0, data.settings.maxFailures);
  const counts = new Map(data.failureCounts.map((entry) => [entry.status, entry.runs]));
  for (const run of added) counts.set(run.status, (counts.get(run.status) ?? 0) + 1);
  const order = [...RETRYABLE_STATUSES, ...[...counts.keys()].filter((status) => !(RETRYABLE_STATUSES as readonly string[]).includes(status)).sort()];
  return {
    ...data,
    totals: { ...data.totals, runs: data.totals.runs + added.length, failedRuns: data.totals.failedRuns + added.length },
    failureCounts: order.flatMap((status) => (counts.has(status) ? [{ status, runs: counts.get(status)! }] : [])),
    failures,
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
