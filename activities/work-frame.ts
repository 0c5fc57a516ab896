/**
 * The work frame: the one frame every activity that spends credits or lands answers runs in (a
 * target's listing, a job's enrichment, a job's results, failed calls made again, tracking). It
 * claims the work's call journal for this attempt, turns the work's grant into a WorkBudget
 * (src/harvest/work-budget.ts), keeps the work's checkpoint in heartbeats, made durable with the
 * journal's sync (which makes the run's answers durable first), bounds the run's calls in flight,
 * and, when the work is done, reads what it spent back from the journal. Each billed call inside it
 * is made by meteredCall (metered-call.ts); a page's answer lands by page-landing.ts.
 */
import { Context } from '@temporalio/activity';
import type { LimitFunction } from 'p-limit';
import { DEFAULT_CALL_DEADLINE_MS, type SocialApiClient } from '../src/api/client.js';
import type { PriceTable } from '../src/api-catalog/endpoints.js';
import type { CrossRunBudget } from '../src/harvest/budgets.js';
import type { Enrichment } from '../src/harvest/harvest-types.js';
import type { LiveWork } from '../src/harvest/progress.js';
import { WorkBudget } from '../src/harvest/work-budget.js';
import type { Logger } from '../src/logger.js';
import { RunBudgets } from '../src/store/budget-ledger.js';
import { CallJournal } from '../src/store/call-journal.js';
import type { Store } from '../src/store/store.js';
import { CheckpointHeartbeat } from './checkpoint-heartbeat.js';
import { asActivityFailure } from './failures.js';
import { withProgressAttempt } from './outages.js';
import { withRunCallLimit } from './run-call-limits.js';

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
  reserveAgainstBudgets(deps.store, journal, input);
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
    throw withProgressAttempt(asFailure(failure, checkpoint), () => checkpoint.attemptOfLastProgress);
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


/**
 * The frame of a work whose journal is its target's for the whole run, in every attempt and every
 * execution of the run's workflow: a job's start, whose retry must find the intent of a start that
 * died in flight, and not start (and pay for) a second job. Its journal is read, not claimed: a
 * claim orders the attempts of one activity, and a later execution's first attempt would find an
 * earlier execution's claim above it. It makes one call, so it has no checkpoint or grant of its
 * own: the workflow holds the job's worst case (workflows/bracket.ts).
 */
export async function inRunJournal<R>(store: Store, run: RunBudgetsInput, workId: string, body: (journal: CallJournal) => Promise<R>): Promise<R> {
  const journal = await CallJournal.load(store.journals, run.runId, workId);
  reserveAgainstBudgets(store, journal, run);
  try {
    return await body(journal);
  } finally {
    await journal.close();
  }
}

/** The run, and the budgets across runs that cover it, as a frame needs them for its calls' reservations. */
export interface RunBudgetsInput {
  runId: string;
  budgets?: CrossRunBudget[];
  callDeadlineMs?: number;
}

/** Makes every call of `journal` reserve its worst case against the budgets across runs that cover the run, if any. */
function reserveAgainstBudgets(store: Store, journal: CallJournal, run: RunBudgetsInput): void {
  if (run.budgets && run.budgets.length > 0) journal.budgets = new RunBudgets(store.budgets, run.runId, run.budgets, budgetLeaseMs(run.callDeadlineMs));
}

/**
 * How long a call's reservation against the budgets across runs is held unsettled: the call's
 * deadline (no attempt runs past it), and as long again at most ten seconds for its settlement to
 * be written. Past it, an unsettled reservation counts as spent at its worst case.
 */
export function budgetLeaseMs(callDeadlineMs = DEFAULT_CALL_DEADLINE_MS): number {
  return callDeadlineMs + Math.min(callDeadlineMs, 10_000);
}
