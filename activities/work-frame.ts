/**
 * The frame every metered work runs in (a target's listing, a job's enrichment, failed calls made
 * again, tracking): its journal claimed by this attempt, its grant as a WorkBudget, its checkpoint
 * heartbeated, the run's limit of calls in flight, one ItemEnricher per target (so a call that
 * fails is recorded against its own target), and, when done, what it spent read back from the
 * journal in the store. Whatever the work leaves in flight finishes before the journal closes.
 */
import { Context } from '@temporalio/activity';
import type { SocialApiClient } from '../src/api/client.js';
import type { PriceTable } from '../src/api-catalog/endpoints.js';
import type { Enrichment } from '../src/harvest/harvest-types.js';
import type { LiveWork } from '../src/harvest/progress.js';
import type { Logger } from '../src/logger.js';
import { CallJournal } from '../src/store/call-journal.js';
import type { Store } from '../src/store/store.js';
import { CheckpointHeartbeat } from './checkpoint-heartbeat.js';
import { asActivityFailure } from './failures.js';
import { ItemEnricher, type WorkStop } from './item-enricher.js';
import { claimJournal, WorkBudget } from './metered-call.js';
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
  /** The enricher of one target's items (made once per target). */
  enricherFor(target: string): ItemEnricher;
  /** The first stop an enricher met (a 402, a refused key), if any. */
  stop(): WorkStop | undefined;
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
 * Runs `body` in a work frame. A failure leaves as an activity failure (`asFailure` may add what
 * the work durably reached, from its checkpoint).
 */
export async function inWorkFrame<P extends object, R>(
  deps: WorkFrameDeps,
  input: WorkFrameInput,
  checkpointOf: FrameCheckpoint<P>,
  body: (frame: WorkFrame<P>) => Promise<R>,
  asFailure: (failure: unknown, checkpoint: CheckpointHeartbeat<P>) => unknown = (failure) => asActivityFailure(failure),
): Promise<R> {
  const context = Context.current();
  const journal = await claimJournal(deps.store, input.runId, input.workId, context.info.attempt);
  const budget = new WorkBudget(input.grant, journal);
  // The journal's sync makes the run's answers durable first, then the journal (a group commit):
  // a checkpoint is heartbeated only once it has run after it.
  const checkpoint = new CheckpointHeartbeat<P>(checkpointOf.start, (durable) => checkpointOf.live(durable, journal), () => journal.sync());
  let inFlight: Promise<unknown> = Promise.resolve();
  try {
    return await withRunCallLimit(input.runId, input.calls, async (limit) => {
      const enrichers = new Map<string, ItemEnricher>();
      const frame: WorkFrame<P> = {
        context,
        journal,
        budget,
        checkpoint,
        enricherFor(target) {
          const made =
            enrichers.get(target) ??
            new ItemEnricher({ client: deps.client, store: deps.store, runId: input.runId, harvest: input.harvest, target, journal, budget, limit, enrich: input.enrich, prices: input.prices, signal: context.cancellationSignal, callDeadlineMs: input.callDeadlineMs, logger: deps.logger });
          enrichers.set(target, made);
          return made;
        },
        stop: () => [...enrichers.values()].find((enricher) => enricher.stop)?.stop,
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
