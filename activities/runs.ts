/**
 * Activities at the edges of a run: prepare (refuse while credits are low, read what earlier
 * runs saw, load today's prices) and finish (record the outcome, load the landings into the
 * warehouse). Also pausing a harvest's schedule, when the API says the credits ran out.
 */
import { Context } from '@temporalio/activity';
import type { SocialApiClient } from '../src/api/client.js';
import type { PriceTable } from '../src/api-catalog/endpoints.js';
import { loadPriceTable } from '../src/config/prices.js';
import { runFailures } from '../src/store/call-journal.js';
import type { RunLanding } from '../src/store/landing.js';
import { quarantineLine } from '../src/store/quarantine.js';
import { LocalStore, type Store } from '../src/store/store.js';
import { coversListing } from '../src/store/listing-coverage.js';
import { existsSync } from 'node:fs';
import { runFoldersWithAnswers } from '../src/store/answer-segments.js';
import { lakeCatalogFile } from '../src/store/layout.js';
import { LOAD_PROCESS_RENEW_MS, loggingReporter, WarmLoader } from '../src/warehouse/warm-loader.js';
import type { KnownItem } from '../src/warehouse/known-items.js';
import { repairLines } from '../src/warehouse/lake-repair-report.js';
import type { SchemaDrift } from '../src/warehouse/loader.js';
import { loadStarted, runsFinished } from '../src/metrics/worker-metrics.js';
import type { RunIdentity } from './run-guard.js';
import { asActivity } from './failures.js';
import { waitOutOutages, type OutageWait } from '../src/store/outage.js';
import type { Logger } from '../src/logger.js';
import { quarantinedText, type AnswersQuarantined, type FailedCall, type HarvestStatus } from '../src/harvest/progress.js';
import { statusAfterLoad } from '../src/harvest/run-state.js';
import type { TargetPlan } from '../src/harvest/targets.js';
import type { TrackingForecast } from '../src/harvest/tracking.js';
import { firstPageLimit, KNOWN_IDS } from '../src/harvest/plan-history.js';
import type { RunForecast } from '../src/harvest/run-forecast.js';
import { apiTimeOnce, withForecast, type ApiTime, type ForecastInput } from './run-forecast.js';
import { DEFAULT_SCHEMA_CONTRACT, type HarvestSchemaContract, type SchemaContracts } from '../src/harvest/schema-contract.js';
import { spentBudgetOf } from './call-budgets.js';
import { StepTimes, type StepTimings } from '../src/warehouse/step-times.js';

export interface TargetKnowledge {
  /** Newest ids already in the warehouse: an incremental run stops at the first it meets. */
  knownIds: string[];
  /** Size of the first page, from the rate new items appeared before; absent on a first harvest. */
  firstPageLimit?: number;
}

export interface PrepareRunInput extends RunIdentity, ForecastInput {
  runId: string;
  harvest: string;
  startedAt: string;
  budgetCredits: number;
  targets: TargetPlan[];
  /** The harvest's `track.items`: its due items are forecast. */
  trackItems?: { days: number };
}

export interface PreparedRun {
  prices: PriceTable;
  knowledge: Record<string, TargetKnowledge>;
  tracking?: TrackingForecast;
  /** Set when the run must not start: the API said credits are low. */
  blocked?: string;
  /** Set when the run must not start: a budget across runs that covers it is spent (the reason names it). */
  skipped?: string;
  /** What the run is expected to spend, from the lake's history (activities/run-forecast.ts). */
  forecast?: RunForecast;
  /** Repairs of a damaged lake made before the run read it (lake-repair-report.ts's lines). */
  lakeRepairs?: string[];
}

export interface FinishRunInput extends RunIdentity {
  runId: string;
  harvest: string;
  startedAt: string;
  status: string;
  budgetCredits: number;
  creditsSpent: number;
  itemsLanded: number;
  error?: string;
  /** The enrichments the harvest asked for each listed item, for the warehouse's coverage. */
  enrichments?: string[];
  /** A retry: the run's answers in quarantine/ are put back to be loaded first. */
  reloadQuarantined?: boolean;
  /** The harvest's schema contract (absent: evolve), which this run's loads apply to its answers. */
  schemaContract?: HarvestSchemaContract;
}

export interface FinishedRun {
  /** The run's landings in the warehouse, and their rows, whichever load loaded them. */
  landingsLoaded: number;
  rowsLoaded: number;
  /** The run's landings that could not be loaded, moved to quarantine/: the file and why. */
  quarantined: string[];
  /**
   * The run's own answers in quarantine/ once the load ended, and the first one's reason: the run's
   * status is then statusAfterLoad's, as recorded in the warehouse.
   */
  answersQuarantined?: AnswersQuarantined;
  /** Enrichment calls of the run that failed for good: how many, and the first of them. */
  failedCalls?: { total: number; first: FailedCall[] };
  /** Fields the run's answers carried that no column takes (the warehouse's schema_drift). */
  schemaDrift?: SchemaDrift[];
  /** Repairs of a damaged lake the loads during the run and its final load made (lake-repair-report.ts's lines). */
  lakeRepairs?: string[];
  /** Where the final load's time went: this activity's steps, and the load process's as `load/<step>` (step-times.ts). */
  steps?: StepTimings;
}

/** Failed calls a run's summary lists; `harvester show --json` and the journals have the count. */
const FAILED_CALLS_SHOWN = 20;

export interface RunActivityDeps {
  client: SocialApiClient;
  store: Store;
  dataDir: string;
  logger?: Logger;
  pricesFile?: string;
  /** Pauses a harvest's Temporal Schedule, if it has one. */
  pauseSchedule?: (harvest: string, note: string) => Promise<void>;
  /** How often the landings of running runs are loaded, besides each run's final load. */
  loadEveryMs?: number;
  /** How the final load waits out an outage of the lake's catalog or object store (activities/outages.ts). */
  outageWait?: () => OutageWait;
}

/** How often a worker loads what its running runs landed: data appears within about this long. */
export const LOAD_EVERY_MS = 15_000;

/** A run that never finished here (its workflow moved to another worker) stops counting after this long. */
const RUN_FORGOTTEN_AFTER_MS = 24 * 3_600_000;

/**
 * The loads during runs: while a run this worker prepared has not finished, what is landed is
 * loaded every `everyMs`, in the background, so the warehouse fills as the run buys and the run's
 * final load waits only for the rest. Each load is one snapshot per batch; a reader never sees
 * half of one.
 */
class LoadsDuringRuns {
  /** Each running run: when it started here, the landings the loads during it quarantined, and the repairs of the lake they made. */
  readonly #runs = new Map<string, { since: number; quarantined: string[]; lakeRepairs: string[] }>();
  /** The loads during runs that have not answered yet. */
  readonly #loading = new Set<Promise<void>>();
  /**
   * The schema contract of each harvest this worker ran, as its latest run declared it: every load
   * applies them all, since a load takes the pending answers of every run, not only its own.
   * A harvest this worker has not run loads under evolve (src/harvest/schema-contract.ts).
   */
  readonly #contracts = new Map<string, HarvestSchemaContract>();
  #timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly loader: WarmLoader,
    private readonly dataDir: string,
    private readonly everyMs: number,
    private readonly logger: Logger | undefined,
    /** Whether the lake and the answers are the data directory's (not a shared store's). */
    private readonly localStore: boolean,
  ) {}

  /**
   * The loads begin as the run does: what earlier runs left is loaded, and a new data directory's
   * lake is made, while the run buys, so its final load has neither to do (a lake's creation
   * was about 0.15 s of a short run's final load).
   */
  started(runId: string, harvest: string, contract: HarvestSchemaContract | undefined): void {
    this.declared(harvest, contract);
    if (!this.#runs.has(runId)) this.#runs.set(runId, { since: Date.now(), quarantined: [], lakeRepairs: [] });
    if (this.#timer) return;
    // Unref'd: a worker with nothing else to do exits, whatever its runs' schedule.
    this.#timer = setInterval(() => this.#tick(), this.everyMs).unref();
    void this.#startingLoad().then(
      (first) => (first === 'load' ? this.#tick() : first === 'make lake' ? this.#makeLake() : undefined),
      () => this.#tick(),
    );
  }

  /** A run of `harvest` declares its schema contract (absent: evolve): the loads from now on apply it. */
  declared(harvest: string, contract: HarvestSchemaContract | undefined): void {
    this.#contracts.set(harvest, contract ?? { default: DEFAULT_SCHEMA_CONTRACT });
  }

  /** The contracts every load of this worker applies. */
  contracts(): SchemaContracts {
    return Object.fromEntries(this.#contracts);
  }

  /**
   * What the load at the run's start has to do. Nothing, when the data directory's lake is made and
   * no answer of another run is left: a short run's final load would only wait for it (a third of a
   * second of a run of a few seconds). Only make the lake, when it is not made and nothing is left:
   * loading the run's first answers too made its final load wait for a load twice as long, run
   * beside the listing. Else load what is left. A shared store's lake and answers are not in the
   * data directory, so its first load is always made.
   */
  async #startingLoad(): Promise<'nothing' | 'make lake' | 'load'> {
    if (!this.localStore) return 'load';
    const folders = await runFoldersWithAnswers(this.dataDir);
    if (folders.segments.length > 0 || folders.landingFiles.length > 0) return 'load';
    return existsSync(lakeCatalogFile(this.dataDir)) ? 'nothing' : 'make lake';
  }

  #makeLake(): void {
    const runs = [...this.#runs.values()];
    this.#track(
      this.loader.makeLake(this.dataDir).then(
        ({ repair }) => {
          if (repair) for (const run of runs) run.lakeRepairs.push(...repairLines(repair));
        },
        (error: Error) => {
          this.logger?.warn({ err: error.message }, 'making the lake at the run\'s start failed; the final load makes it');
        },
      ),
    );
  }

  /** A load under way, which a run's end waits for (finished). */
  #track(loading: Promise<void>): void {
    this.#loading.add(loading);
    void loading.finally(() => this.#loading.delete(loading));
  }

  /**
   * The run is loading for the last time: no more loads for it. Returns what the loads during it
   * quarantined, once a load still going has answered (a short run ends while its first load runs:
   * what that load set aside would otherwise be reported to no one), and the repairs of the lake they made.
   */
  async finished(runId: string): Promise<{ quarantined: string[]; lakeRepairs: string[] }> {
    const run = this.#runs.get(runId);
    this.#runs.delete(runId);
    if (this.#runs.size === 0) this.#stop();
    await Promise.all(this.#loading);
    return { quarantined: run?.quarantined ?? [], lakeRepairs: run?.lakeRepairs ?? [] };
  }

  #tick(): void {
    for (const [runId, { since }] of this.#runs) if (Date.now() - since > RUN_FORGOTTEN_AFTER_MS) this.#runs.delete(runId);
    if (this.#runs.size === 0) return this.#stop();
    // What a load sets aside is reported to the runs going on when it began, ended since or not.
    const runs = [...this.#runs.values()];
    const load = loadStarted('during_run');
    const loading = this.loader.loadInBackground(
      this.dataDir,
      (result) => {
        load.succeeded();
        for (const run of runs) run.quarantined.push(...result.quarantined.map(quarantineLine));
        if (result.repair) for (const run of runs) run.lakeRepairs.push(...repairLines(result.repair));
      },
      (error) => {
        load.failed();
        this.logger?.warn({ err: error.message }, 'a load during the run failed; the final load loads what it did not');
      },
      this.contracts(),
    );
    this.#track(loading);
  }

  #stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }
}

/** The worker's loads: its load process, and the loads during the runs it prepared. */
interface RunLoads {
  loader: WarmLoader;
  duringRuns: LoadsDuringRuns;
}

export function runActivities(deps: RunActivityDeps) {
  // Loads run in a process of their own (src/warehouse/load-process.ts): DuckDB's memory leaves
  // with it, so a worker's memory does not grow with what its runs land. A load killed with its
  // worker is safe: the loader commits batch by batch and records what it loaded.
  // Its end when nobody asked for it (a crash during the daily maintenance, which no load waits
  // on) and a failed maintenance are logged as errors, with the exit code or signal and last words.
  const loader = new WarmLoader(LOAD_PROCESS_RENEW_MS, loggingReporter(deps.logger));
  // Started with the worker, the load process is ready for a run's first load instead of adding its start to it.
  loader.prewarm();
  const loads: RunLoads = { loader, duringRuns: new LoadsDuringRuns(loader, deps.dataDir, deps.loadEveryMs ?? LOAD_EVERY_MS, deps.logger, deps.store instanceof LocalStore) };

  return {
    // Both map a refused key and an unwritable data directory to failures that are not retried.
    prepareRun: (input: PrepareRunInput): Promise<PreparedRun> =>
      asActivity(async () => {
        const apiTime = apiTimeOnce(deps.client);
        return withForecast(deps, input, await prepareRun(deps, loads, input, apiTime), apiTime);
      }),
    finishRun: (input: FinishRunInput): Promise<FinishedRun> => asActivity(() => finishRun(deps, loads, input)),

    async pauseSchedule(input: { harvest: string; reason: string }): Promise<void> {
      await deps.pauseSchedule?.(input.harvest, input.reason);
    },
  };
}

/** A run's start: refused while credits are low, else recorded, with today's prices and what earlier runs saw. */
async function prepareRun(deps: RunActivityDeps, loads: RunLoads, input: PrepareRunInput, apiTime: ApiTime): Promise<PreparedRun> {
  loads.duringRuns.started(input.runId, input.harvest, input.harvestConfig?.schema_contract);
  const prices = loadPriceTable(deps.pricesFile);
  const low = await deps.store.creditsLow();
  if (low) return { prices, knowledge: {}, blocked: `credits.low since ${low.since}: no new run starts until the plan changes` };
  const spentBudget = await spentBudgetOf(deps.store.budgets, input.harvestConfig?.budgets, prices);
  if (spentBudget) return { prices, knowledge: {}, skipped: spentBudget };
  await deps.store.writeLanding({ format: 1, kind: 'run', run_id: input.runId, harvest: input.harvest, seq: Date.now(), status: 'running', started_at: input.startedAt, budget_credits: input.budgetCredits });
  // Only after a complete listing may a run stop at known items; after one that stopped short,
  // it lists again to max_items, filling the gap the earlier run left.
  const coverage = await Promise.all(input.targets.map((target) => deps.store.readCoverage(target.key)));
  const incremental = input.targets.filter((target, index) => coversListing(coverage[index], target.maxItems));
  if (incremental.length === 0 && !input.trackItems) return { prices, knowledge: {} };
  // Observations carry the API's clock, so "now" is the API's too (a free call's Date header),
  // asked while DuckDB loads and the lake is read, not before them. A failed ask fails the
  // activity below, where it is awaited; meanwhile it is no unhandled rejection.
  const askedApiTime = apiTime();
  askedApiTime.catch(() => undefined);
  // Loaded here, not at the top: DuckDB costs a third of a second to load, which a first run
  // (and the start of every `harvester run`) need not pay.
  const { newestKnownItems, forecastTracking } = await import('../src/warehouse/known-items.js');
  // A lake whose files are not whole is repaired by the load process first (lake-repair.ts), then
  // read again; what the repair did is the run's to say (its summary, `harvester show`).
  const { readingRepaired, repairReport } = await import('../src/warehouse/lake-repair.js');
  const lakeRepairs: string[] = [];
  const repaired = <T>(read: () => Promise<T>) =>
    readingRepaired(read, async (damage) => {
      deps.logger?.warn({ err: damage.message }, 'the warehouse is damaged: repairing it before the run reads it');
      const { repair } = await loads.loader.makeLake(deps.dataDir);
      if (repair) deps.logger?.warn({ repair: repairReport(repair) }, 'repaired the warehouse');
      if (repair) lakeRepairs.push(...repairLines(repair));
    });
  const known = await repaired(() => newestKnownItems(deps.dataDir, incremental, KNOWN_IDS));
  const apiNow = await askedApiTime;
  const knowledge = knowledgeOf(incremental, known, apiNow);
  const trackItems = input.trackItems;
  const tracking = trackItems ? await repaired(() => forecastTracking(deps.dataDir, input.targets, trackItems.days, apiNow, prices)) : undefined;
  return { prices, knowledge, ...(tracking ? { tracking } : {}), ...(lakeRepairs.length > 0 ? { lakeRepairs } : {}) };
}

/** What each incremental target's run knows from the warehouse: the ids to stop at, and the first page's size. */
function knowledgeOf(incremental: TargetPlan[], newest: Map<string, KnownItem[]>, apiNow: number): Record<string, TargetKnowledge> {
  const knowledge: Record<string, TargetKnowledge> = {};
  for (const target of incremental) {
    const known = newest.get(target.key) ?? [];
    if (known.length === 0) continue;
    const limit = firstPageLimit(known.flatMap((item) => (item.postedAtMs === null ? [] : [item.postedAtMs])), apiNow);
    knowledge[target.key] = { knownIds: known.map((item) => item.id), ...(limit !== undefined ? { firstPageLimit: limit } : {}) };
  }
  return knowledge;
}

/** A run's end: its outcome recorded, then its landings loaded into the warehouse, heartbeating meanwhile. */
async function finishRun(deps: RunActivityDeps, loads: RunLoads, input: FinishRunInput): Promise<FinishedRun> {
  // As the run's attempt declares it now: a retry may load what an earlier attempt's contract set aside.
  loads.duringRuns.declared(input.harvest, input.schemaContract);
  const steps = new StepTimes();
  const failed = [...(await steps.time('read failed calls', () => runFailures(deps.store.journals, input.runId)))];
  let seq = 0;
  const finalStatus = (status: string, quarantined?: AnswersQuarantined): RunLanding => ({
    format: 1,
    kind: 'run',
    run_id: input.runId,
    harvest: input.harvest,
    // The status landed after the load must win over the one before it, whatever the clock did.
    seq: (seq = Math.max(Date.now(), seq + 1)),
    status,
    started_at: input.startedAt,
    finished_at: new Date().toISOString(),
    budget_credits: input.budgetCredits,
    credits_spent: input.creditsSpent,
    items_landed: input.itemsLanded,
    ...(input.error || quarantined ? { error: [input.error, quarantined && quarantinedText(quarantined)].filter(Boolean).join('; ') } : {}),
    ...(input.enrichments ? { enrichments: input.enrichments } : {}),
    failed_calls: failed.map(([, failure]) => ({ endpoint: failure.endpoint, subject: failure.subject, reason: failure.reason, ...(failure.request_id ? { request_id: failure.request_id } : {}), at: failure.at })),
    ...(quarantined ? { answers_quarantined: quarantined.count } : {}),
  });
  // A retry puts the run's answers in quarantine back to be loaded: this version loads what an
  // earlier one could not (text repaired, extract.ts), and sets aside again, with its reason, what it cannot.
  if (input.reloadQuarantined) {
    const requeued = await deps.store.requeueQuarantinedLandings(input.runId);
    if (requeued > 0) deps.logger?.info({ run: input.runId, requeued }, 'answers in quarantine put back to be loaded');
  }
  await steps.time('land status', () => deps.store.writeLanding(finalStatus(input.status)));
  // The load may take minutes: heartbeats let a killed worker's load move on within seconds.
  const context = Context.current();
  const heartbeat = setInterval(() => context.heartbeat(), 5_000);
  try {
    const { schemaDrift, ...loaded } = await finalLoad(deps, loads, input, context, steps);
    const answersQuarantined = loaded.answersQuarantined;
    if (answersQuarantined) {
      // Answers bought and landed are not in the lake: the run's status says so, in the lake too
      // (harvest_runs), recorded over the one landed before the load (a higher seq). The loader
      // kept the run's answers in the data directory meanwhile (foldersOfEndedRuns), for its retry.
      await deps.store.writeLanding(finalStatus(statusAfterLoad(input.status as HarvestStatus, answersQuarantined.count), answersQuarantined));
      await runLoad(deps, loads, input.runId, context);
    }
    runsFinished.inc({ harvest: input.harvest, status: statusAfterLoad(input.status as HarvestStatus, answersQuarantined?.count ?? 0) });
    return {
      ...loaded,
      failedCalls: { total: failed.length, first: failed.slice(0, FAILED_CALLS_SHOWN).map(([key, failure]) => ({ key, ...failure })) },
      ...(schemaDrift ? { schemaDrift } : {}),
      steps: { ...steps.toJSON(), ...loaded.steps },
    };
  } finally {
    clearInterval(heartbeat);
  }
}

/** The run's final load, once the loads during it have answered: what of the run is in the warehouse, and what was set aside. */
async function finalLoad(deps: RunActivityDeps, { loader, duringRuns }: RunLoads, input: FinishRunInput, context: Context, steps: StepTimes): Promise<Omit<FinishedRun, 'failedCalls'>> {
  const { quarantined: quarantinedDuringRun, lakeRepairs: repairedDuringRun } = await steps.time('wait for loads during run', () => duringRuns.finished(input.runId));
  const load = loadStarted('final');
  const result = await steps.time('load', () => runLoad(deps, { loader, duringRuns }, input.runId, context)).catch((error: unknown) => {
    load.failed();
    throw error;
  });
  load.succeeded();
  // This run's landings only (a load on a shared data directory also loads other runs'), and
  // all of them, the loads during the run's and an earlier attempt's too.
  const { landings: landingsLoaded, rows: rowsLoaded, schemaDrift } = result.run ?? { landings: 0, rows: 0, schemaDrift: [] };
  if (schemaDrift.length > 0) deps.logger?.warn({ run: input.runId, schemaDrift }, 'the API\'s answers carry fields beyond their schema: each handled by the harvest\'s schema contract (schema_drift)');
  // Its own landings in quarantine, and any other a load during it set aside.
  const own = await steps.time('quarantine check', () => deps.store.quarantinedLandingsOfRun(input.runId));
  const quarantined = [...new Set([...own, ...quarantinedDuringRun, ...result.quarantined.map(quarantineLine)])].sort();
  deps.logger?.info(
    { run: input.runId, harvest: input.harvest, landings: landingsLoaded, rows: rowsLoaded, quarantined: quarantined.length, ms: result.durationMs, snapshot: result.snapshot, steps: result.steps },
    'run loaded into the warehouse',
  );
  const lakeRepairs = [...repairedDuringRun, ...(result.repair ? repairLines(result.repair) : [])];
  return {
    landingsLoaded,
    rowsLoaded,
    quarantined,
    ...(own.length > 0 ? { answersQuarantined: { count: own.length, reason: reasonOfLine(own[0] as string) } } : {}),
    ...(schemaDrift.length > 0 ? { schemaDrift } : {}),
    ...(lakeRepairs.length > 0 ? { lakeRepairs } : {}),
    ...(result.steps ? { steps: Object.fromEntries(Object.entries(result.steps).map(([step, ms]) => [`load/${step}`, ms])) } : {}),
  };
}

/**
 * A load of the run's answers. The lake's catalog and data files are the shared store's services:
 * their outage is waited out (the loader commits batch by batch, so a load tried again loads only what is left).
 */
function runLoad(deps: RunActivityDeps, { loader, duringRuns }: RunLoads, runId: string, context: Context): ReturnType<WarmLoader['load']> {
  const loadOnce = () => loader.load(deps.dataDir, context.cancellationSignal, runId, duringRuns.contracts());
  return deps.outageWait ? waitOutOutages(loadOnce, deps.outageWait) : loadOnce();
}

/** The reason of a quarantined landing, from the line quarantineLine made of it (`<file>: <reason>`). */
function reasonOfLine(line: string): string {
  const at = line.indexOf(': ');
  return at === -1 ? line : line.slice(at + 2);
}
