/**
 * Metered work: how a piece of work spends the credits the workflow granted it. The frame every
 * metered work runs in (a target's listing, a job's enrichment, failed calls made again, tracking)
 * turns its grant into a WorkBudget; each billed call in it is made once by meteredCall: within the
 * grant, journal its worst case as an intent, call the API, land the answer (landAt, landingOfCall), and
 * settle the charge; cancel the intent if the API cannot have charged anything. The client's own
 * retries go through the journal too: before it sends a call again after an attempt whose answer
 * was lost once the request had left, that attempt stays journaled at its worst case, and once an
 * attempt answers, each lost one is settled at the same charge (the same request, so the same
 * price). No attempt the API may have charged is left out of the run's credits. The worker's
 * metrics count each call as it goes (src/metrics/worker-metrics.ts).
 */
import { Context } from '@temporalio/activity';
import type { LimitFunction } from 'p-limit';
import { DEFAULT_CALL_DEADLINE_MS, type CallOptions, type CallReport, type PageResult, type SocialApiClient } from '../src/api/client.js';
import type { PriceTable } from '../src/api-catalog/endpoints.js';
import { neverCharged, RateLimitedError, SocialApiError, type NetworkError } from '../src/api/errors.js';
import type { Enrichment } from '../src/harvest/harvest-types.js';
import type { LiveWork } from '../src/harvest/progress.js';
import type { Logger } from '../src/logger.js';
import { calls, creditsCharged, creditsHeld, creditsRemaining, itemsLanded, landingsWaiting } from '../src/metrics/worker-metrics.js';
import { CallJournal } from '../src/store/call-journal.js';
import type { PageLanding } from '../src/store/landing.js';
import { runFolderOfKey } from '../src/store/layout.js';
import type { Store } from '../src/store/store.js';
import { CheckpointHeartbeat } from './checkpoint-heartbeat.js';
import { asActivityFailure } from './failures.js';
import { withRunCallLimit } from './run-call-limits.js';
import { CallReservations } from './call-budgets.js';
import { RunBudgets } from '../src/store/budget-ledger.js';
import type { CrossRunBudget } from '../src/harvest/budgets.js';

/**
 * The credits one activity's work may spend: the grant the workflow gave it, less what its journal
 * has committed (settled charges and the worst case of calls begun), less what it holds for calls
 * it is about to make (a landed page's enrichment). Every call's worst case is inside the grant
 * before it is sent, so the work never spends beyond it, in flight or after a crash.
 */
export class WorkBudget {
  private held = 0;

  constructor(
    readonly grant: number,
    readonly journal: CallJournal,
  ) {}

  free(): number {
    return this.grant - this.journal.committed() - this.held;
  }

  hold(credits: number): void {
    this.held += credits;
  }

  /** Holds `credits` if the grant still has them free; false, holding nothing, if not. */
  tryHold(credits: number): boolean {
    if (credits > this.free()) return false;
    this.hold(credits);
    return true;
  }

  release(credits: number): void {
    this.held -= credits;
  }
}

/** What a work frame is given: the run, the work's own journal and grant, prices, enrichment and limits. */
export interface WorkFrameInput {
  runId: string;
  harvest: string;
  /** Names this piece of work and its journal; unique per run. */
  workId: string;
  /** Credits it may spend, granted out of the run's budget. */
  grant: number;
  prices: PriceTable;
  enrich: Enrichment;
  /** Enrichment calls in flight for the run, in this worker. */
  calls: number;
  /** Each billed call's overall deadline, its retries included (the harvest's `call_deadline_seconds`). */
  callDeadlineMs?: number;
  /** The budgets across runs that cover the run: every call reserves its worst case against them (call-budgets.ts). */
  budgets?: CrossRunBudget[];
}

/** What a work frame gives the enrichers of its items (activities/item-enricher.ts), whatever their target. */
export interface EnricherParts {
  client: SocialApiClient;
  store: Store;
  runId: string;
  harvest: string;
  journal: CallJournal;
  budget: WorkBudget;
  /** The run's calls in flight in this worker. */
  limit: LimitFunction;
  enrich: Enrichment;
  prices: PriceTable;
  /** Aborted when Temporal has given this attempt up (a timed-out heartbeat): no call starts after. */
  signal: AbortSignal;
  /** Each call's overall deadline, its retries included. */
  callDeadlineMs?: number;
  logger?: Logger;
}

export interface WorkFrameDeps {
  client: SocialApiClient;
  store: Store;
  logger?: Logger;
}

/** What a work spent: its journal's totals, lost calls' worst cases included. */
export interface WorkSpent {
  credits: number;
  lostCalls: number;
}

export interface WorkFrame<P extends object> {
  readonly context: Context;
  readonly journal: CallJournal;
  readonly budget: WorkBudget;
  /** Where a retry resumes: `checkpoint.resumed`, committed as the work reaches durable points. */
  readonly checkpoint: CheckpointHeartbeat<P>;
  /** What the enrichers of the work's items are made of (TargetEnrichers, ItemEnricher). */
  readonly enricherParts: EnricherParts;
  /**
   * Makes everything the work landed and journaled durable, with its latest committed point (one
   * group commit): awaited before the work tells the workflow (or the store's coverage) what it did.
   */
  durable(): Promise<void>;
  /** Work left in flight (enrichment of pages) that must finish before the journal closes. */
  keep(work: Promise<unknown>): void;
  /**
   * What the work spent, read back from the store, not from memory: an earlier attempt that
   * Temporal gave up but that had not yet stopped (its worker cut off from Temporal) may have
   * journaled calls since.
   */
  spent(): Promise<WorkSpent>;
}

/** How a work's checkpoint starts, and what its heartbeats say it has done (for `harvester run`). */
export interface FrameCheckpoint<P extends object> {
  start: () => P;
  live: (durable: P, journal: CallJournal) => LiveWork;
}

/**
 * Runs `body` in a work frame: its journal claimed by this attempt, its grant as a WorkBudget, its
 * checkpoint heartbeated, the run's limit of calls in flight (with the rest, the parts of its
 * items' enrichers), and, when done, what it spent read back
 * from the journal in the store. Whatever the work leaves in flight finishes before the journal
 * closes. A failure leaves as an activity failure (`asFailure` may add what the work durably
 * reached, from its checkpoint).
 */
export async function inWorkFrame<P extends object, R>(
  deps: WorkFrameDeps,
  input: WorkFrameInput,
  checkpointOf: FrameCheckpoint<P>,
  body: (frame: WorkFrame<P>) => Promise<R>,
  asFailure: (failure: unknown, checkpoint: CheckpointHeartbeat<P>) => unknown = (failure) => asActivityFailure(failure),
): Promise<R> {
  const context = Context.current();
  const journal = await claimJournal(deps.store, input.runId, input.workId, context.info.attempt, context.cancellationSignal);
  const budget = new WorkBudget(input.grant, journal);
  if (input.budgets && input.budgets.length > 0) journal.budgets = new RunBudgets(deps.store.budgets, input.runId, input.budgets, budgetLeaseMs(input.callDeadlineMs));
  // The journal's sync makes the run's answers durable first, then the journal (a group commit):
  // a checkpoint is heartbeated only once it has run after it.
  const checkpoint = new CheckpointHeartbeat<P>(checkpointOf.start, (durable) => checkpointOf.live(durable, journal), () => journal.sync());
  let inFlight: Promise<unknown> = Promise.resolve();
  try {
    return await withRunCallLimit(input.runId, input.calls, async (limit) => {
      const frame: WorkFrame<P> = {
        context,
        journal,
        budget,
        checkpoint,
        enricherParts: { client: deps.client, store: deps.store, runId: input.runId, harvest: input.harvest, journal, budget, limit, enrich: input.enrich, prices: input.prices, signal: context.cancellationSignal, callDeadlineMs: input.callDeadlineMs, logger: deps.logger },
        durable: () => checkpoint.flush(),
        keep(work) {
          work.catch(() => undefined);
          inFlight = Promise.allSettled([inFlight, work]);
        },
        async spent() {
          const totals = (await CallJournal.load(deps.store.journals, input.runId, input.workId)).totals();
          return { credits: totals.credits, lostCalls: totals.lostCalls };
        },
      };
      return body(frame);
    });
  } catch (failure) {
    throw asFailure(failure, checkpoint);
  } finally {
    // Enrichment may still be in flight when the work failed: it must finish before the journal
    // closes (its own error, if any, is the lesser one).
    await inFlight;
    checkpoint.stop();
    // A sync still under way ends before the journal closes.
    await checkpoint.flush().catch(() => undefined);
    await journal.close();
  }
}
/**
 * How long a call's reservation against the budgets across runs is held unsettled: the call's
 * deadline (no attempt runs past it), and as long again at most ten seconds for its settlement to
 * be written. Past it, an unsettled reservation counts as spent at its worst case.
 */
export function budgetLeaseMs(callDeadlineMs = DEFAULT_CALL_DEADLINE_MS): number {
  return callDeadlineMs + Math.min(callDeadlineMs, 10_000);
}

/**
 * The journal of a piece of work, replayed and claimed by this activity attempt, so an earlier
 * attempt still running stops buying. A store that cannot be read or written fails the attempt as
 * the run-stopping failure it is, before anything is bought.
 */
export async function claimJournal(store: Store, runId: string, workId: string, attempt: number, signal?: AbortSignal): Promise<CallJournal> {
  try {
    const journal = await CallJournal.load(store.journals, runId, workId);
    await journal.claim(attempt, signal);
    return journal;
  } catch (error) {
    throw asActivityFailure(error);
  }
}

/** What a metered call needs of its answer: what the API charged for it. */
interface Charged {
  creditsCharged: number;
}

export interface MeteredCall<R extends Charged> {
  journal: CallJournal;
  /** The landing key of the answer: what the journal's records name. */
  key: string;
  /** The most the call can cost: held in the journal until it settles. */
  worst: number;
  /** The API call, given the options that journal its repeated attempts. */
  call: (options: CallOptions) => Promise<R>;
  /** Lands the answer durably; the charge settles only after it. */
  land: (result: R) => unknown;
  /**
   * For a call that must never be sent twice (a job start: a second would make a second job,
   * charged too): called instead of sending it again after an attempt whose answer was lost, it
   * throws, and the lost attempt's intent stays open at its worst case.
   */
  neverRepeat?: (lost: NetworkError) => never;
  /** The call's labels in the worker's metrics (src/metrics/worker-metrics.ts), and its items when it lists some. */
  meter: CallMeter;
  /**
   * The API charges the call later, not in its answer (a job's start: the job is charged when it
   * completes): its reservations against the budgets across runs settle at its worst case, the
   * most it can be charged, rather than at the answer's charge of nothing.
   */
  chargedLater?: boolean;
}

/** What the worker's metrics say of a call: its harvest and endpoint, and whether its answer's items are listed items. */
export interface CallMeter {
  harvest: string;
  endpoint: string;
  /** A listing page's items count as items landed; an enrichment's answer or a comments page does not. */
  listsItems?: boolean;
}

/**
 * Landing failures of this worker, by run (the first folder of a landing key). A store that could
 * not take an answer (a full disk, say) fails the attempt that met it, and would fail the others of
 * the run in flight here the same way: every attempt that was running when it happened sends no
 * more calls (a page's enrichment queued, the pages after), as each would be charged and then lost.
 * An attempt begun after it (a retry, once space is freed) buys as usual.
 */
const landingFailures = new Map<string, { error: unknown; at: number }>();
/** When each attempt's journal made its first call, on the same count as the failures' `at`. */
const journalsBegun = new WeakMap<CallJournal, number>();
let moments = 0;

/** Throws the landing failure of the run that this attempt was running at, if any. */
function refuseAfterLandingFailure(journal: CallJournal, key: string): void {
  if (!journalsBegun.has(journal)) journalsBegun.set(journal, ++moments);
  const failure = landingFailures.get(runFolderOfKey(key));
  if (failure && failure.at > journalsBegun.get(journal)!) throw failure.error;
}

function rememberLandingFailure(key: string, error: unknown): void {
  // The latest one: an attempt begun after an earlier failure stops at its own.
  const run = runFolderOfKey(key);
  landingFailures.delete(run);
  landingFailures.set(run, { error, at: ++moments });
  // A few runs' worth: the newest failures are the ones attempts in flight can meet.
  if (landingFailures.size > 64) landingFailures.delete(landingFailures.keys().next().value!);
}

export async function meteredCall<R extends Charged>({ journal, key, worst, call, land, neverRepeat, meter, chargedLater }: MeteredCall<R>): Promise<R> {
  const labels = { harvest: meter.harvest, endpoint: meter.endpoint };
  refuseAfterLandingFailure(journal, key);
  await journal.intend(key, worst);
  creditsHeld.inc({ harvest: meter.harvest }, worst);
  let lostAttempts = 0;
  // Its reservations against the budgets across runs that cover the run, if any (call-budgets.ts).
  const reservations = new CallReservations(journal.budgets, key, worst);
  const beforeRepeat = async (lost: NetworkError) => {
    neverRepeat?.(lost);
    await journal.intend(key, worst);
    reservations.lostAttempt();
    lostAttempts++;
    calls.inc({ ...labels, outcome: 'lost' });
  };
  const onRetry = (error: SocialApiError) => {
    if (error instanceof RateLimitedError) calls.inc({ ...labels, outcome: 'rate_limited' });
  };
  // The fence, right before each attempt goes on the wire, then the attempt's reservation against
  // the budgets across runs: an attempt refused at either was journaled and never sent, so its
  // intent is cancelled (in its run's late records if the run is over).
  let refusedBeforeSend = false;
  const beforeSend = async () => {
    try {
      await journal.fence();
      await reservations.beforeSend();
    } catch (error) {
      refusedBeforeSend = true;
      throw error;
    }
  };
  let result: R;
  try {
    result = await call({ beforeRepeat, onRetry, beforeSend });
  } catch (error) {
    creditsHeld.dec({ harvest: meter.harvest }, worst);
    let charged: number | undefined;
    if (refusedBeforeSend) await journal.cancel(key);
    else charged = await settleFailure(journal, key, error);
    await reservations.failed(refusedBeforeSend || neverCharged(error), charged);
    // Its earlier lost attempts stay open at their worst case, their charge unknown.
    if (charged !== undefined) creditsCharged.inc(labels, charged);
    calls.inc({ ...labels, outcome: error instanceof RateLimitedError ? 'rate_limited' : refusedBeforeSend || neverCharged(error) ? 'refused' : 'lost' });
    throw error;
  }
  // Charged, whatever comes of its landing: the budgets across runs settle at once.
  await reservations.answered(chargedLater ? worst : result.creditsCharged);
  // Answered: its hold is released, and it was charged, landed or not. Each lost attempt was
  // charged what the one that answered was: the same request.
  creditsHeld.dec({ harvest: meter.harvest }, worst);
  creditsCharged.inc(labels, result.creditsCharged * (1 + lostAttempts));
  const remaining = (result as Partial<{ creditsRemaining: number }>).creditsRemaining;
  if (remaining !== undefined) creditsRemaining.set(remaining);
  try {
    await land(result);
  } catch (error) {
    rememberLandingFailure(key, error);
    calls.inc({ ...labels, outcome: 'lost' });
    // Charged, and not landed (a full disk, say): counted at its charge, as calls whose answers
    // were lost. If the journal cannot take that either, its intents stay open at their worst case.
    try {
      for (let attempt = 0; attempt <= lostAttempts; attempt++) await journal.settleLost(key, result.creditsCharged);
    } catch {
      /* the intents stand */
    }
    throw error;
  }
  // Landed: counted as such even if the journal's settlement below fails (the run reads the landing back).
  calls.inc({ ...labels, outcome: 'answered' });
  landingsWaiting.landed();
  const items = (result as Partial<{ items: unknown[] }>).items;
  if (meter.listsItems && Array.isArray(items)) itemsLanded.inc(labels, items.length);
  await journal.settle(key, result.creditsCharged);
  for (let attempt = 0; attempt < lostAttempts; attempt++) await journal.settleLost(key, result.creditsCharged);
  return result;
}

/**
 * The last attempt of a failed call: cancelled when the API cannot have charged it, settled at the
 * charge the API reported for an answer the client refused (it is not data), and otherwise left
 * open at its worst case. Earlier lost attempts stay open at their worst case.
 */
async function settleFailure(journal: CallJournal, key: string, error: unknown): Promise<number | undefined> {
  if (neverCharged(error)) await journal.cancel(key);
  else if (error instanceof SocialApiError && error.creditsCharged !== undefined) {
    await journal.settleLost(key, error.creditsCharged);
    return error.creditsCharged;
  }
  return undefined;
}

/** Where a page sits: the run, the target and its page number, and the call's parameters. */
export interface PagePlace {
  runId: string;
  harvest: string;
  target: string;
  page: number;
  params: Record<string, string>;
  rankOffset?: number;
  nextCursor?: string;
  hasMore?: boolean;
}

/**
 * The `land` of a list page's call: the page lands as the API sent it, at `place`, with where its
 * list goes on. The answer goes from the call to the store here, in one step, awaited before the
 * charge settles.
 */
export function landAt(store: Store, place: PagePlace): (answer: PageResult<unknown>) => Promise<string> {
  return (answer) => store.writeLanding(landingOfCall({ ...place, nextCursor: answer.nextCursor, hasMore: answer.hasMore }, answer, answer.items), { untilSync: true });
}

/** The landing of one billed answer: what the API sent, what it cost, and where it belongs. */
export function landingOfCall(place: PagePlace, report: CallReport, data: unknown): PageLanding {
  return {
    format: 1,
    kind: 'page',
    run_id: place.runId,
    harvest: place.harvest,
    target: place.target,
    page: place.page,
    endpoint: report.endpoint,
    params: place.params,
    request_id: report.requestId,
    // The API's clock, not this worker's: observations' ages are measured on it.
    observed_at: report.answeredAt.toISOString(),
    call: {
      request_id: report.requestId,
      units: Array.isArray(data) ? data.length : 1,
      credits: report.creditsCharged,
      ...(report.cache ? { cache: report.cache } : {}),
    },
    ...(place.rankOffset !== undefined ? { rank_offset: place.rankOffset } : {}),
    ...(place.nextCursor !== undefined ? { next_cursor: place.nextCursor } : {}),
    ...(place.hasMore !== undefined ? { has_more: place.hasMore } : {}),
    data,
  };
}
