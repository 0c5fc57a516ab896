/**
 * Enrichment of the items a job listed, read from its landed results pages a page at a time (so
 * thousands of URLs never pass through the workflow), with many calls in flight. Heartbeats the
 * next page once a page's items are enriched; a retry resumes there, and calls it already landed
 * are read back, not bought again.
 */
import type { SocialApiClient } from '../src/api/client.js';
import type { Platform } from '../src/api-catalog/endpoints.js';
import type { Logger } from '../src/logger.js';
import { CallJournal, runFailures } from '../src/store/call-journal.js';
import { itemLandingKey, pageLandingKey } from '../src/store/layout.js';
import type { Store } from '../src/store/store.js';
import type { RunIdentity } from './run-guard.js';
import type { EnrichmentTally } from '../src/harvest/enrichment-tally.js';
import { priceOf } from '../src/harvest/rules.js';
import { ItemEnricher, settleAll, TargetEnrichers } from './item-enricher.js';
import type { WorkBudget } from '../src/harvest/work-budget.js';
import { inWorkFrame, type WorkFrameDeps, type WorkFrameInput, type WorkSpent } from './work-frame.js';
import type { WorkStop } from '../src/harvest/failures.js';
import type { TargetPlan } from '../src/harvest/targets.js';

export interface EnrichLandedInput extends RunIdentity, WorkFrameInput {
  platform: Platform;
  /** The target whose landed pages `fromPage` to `toPage` (inclusive) hold the items. */
  target: string;
  fromPage: number;
  toPage: number;
}

/** The run-wide setting of a work that makes the run's failed enrichment calls again. */
export type RedoFailedInput = Omit<EnrichLandedInput, 'platform' | 'target' | 'fromPage' | 'toPage'>;

/** Tracking's accounts: each one's profile observed once in the run (`track.accounts`). */
export interface ObserveAccountsInput extends RedoFailedInput {
  accounts: { platform: Platform; handle: string }[];
}

export interface ObserveAccountsResult extends WorkSpent {
  enrichment: EnrichmentTally;
  /** Accounts left unobserved because the grant ran out. */
  unobserved: number;
  stop?: WorkStop;
}

/** Tracking's items: the stats of those due at `asOfMs` (src/harvest/tracking.ts), most overdue first. */
export interface ObserveItemsInput extends RedoFailedInput {
  /** The run's listing targets, in config order: an item is tracked with the first that landed it. */
  targets: TargetPlan[];
  days: number;
  /** The API's clock when the run forecast its tracking (prepareRun): the same items are due. */
  asOfMs: number;
}

export interface ObserveItemsResult extends WorkSpent {
  enrichment: EnrichmentTally;
  /** Due items observed in the run so far (by this work or an earlier one), by the target that landed them. */
  observed: Record<string, number>;
  /** Due items left unobserved because the grant ran out. */
  unobserved: number;
  stop?: WorkStop;
}

/** The enricher's target for tracking's calls, as their failures name it. */
export const TRACKED_ACCOUNTS_TARGET = 'tracked-accounts';

export interface RedoFailedResult extends WorkSpent {
  /** Failed calls found in the run's journals and made again. */
  tried: number;
  /** Calls that failed again, by target. */
  stillFailed: Record<string, number>;
  enrichment: EnrichmentTally;
  stop?: WorkStop;
}

export type { WorkSpent };

export interface EnrichLandedResult extends WorkSpent {
  items: number;
  /** Items left unenriched because the grant ran out. */
  unenriched: number;
  enrichment: EnrichmentTally;
  stop?: WorkStop;
}

interface Progress {
  page: number;
  items: number;
  unenriched: number;
  enrichment: EnrichmentTally;
}

/**
 * An enrichment work that keeps no position of its own (failed calls made again, tracked
 * accounts and items observed), in its work frame: its spend and tally returned with its result.
 */
async function enrichmentWork<R extends object>(
  deps: WorkFrameDeps,
  input: RedoFailedInput,
  work: (enricherFor: (target: string) => ItemEnricher, tally: EnrichmentTally, budget: WorkBudget) => Promise<R>,
): Promise<R & WorkSpent & { enrichment: EnrichmentTally; stop?: WorkStop }> {
  return inWorkFrame(deps, input, { start: () => ({}), live: (_, journal) => ({ credits: journal.charged(), items: 0, pages: 0, enriched: 0 }) }, async (frame) => {
    const tally: EnrichmentTally = { calls: 0, skipped: 0, failed: 0 };
    const enrichers = new TargetEnrichers(frame.enricherParts);
    const result = await work((target) => enrichers.of(target), tally, frame.budget);
    // Its answers and records reach the disk (one group commit) before the workflow reads the result.
    await frame.durable();
    const stop = enrichers.stop();
    return { ...result, ...(await frame.spent()), enrichment: tally, ...(stop ? { stop } : {}) };
  });
}

/** The ones of `values` that `test` holds for, in order. */
async function filterAsync<T>(values: readonly T[], test: (value: T) => Promise<boolean>): Promise<T[]> {
  const holds = await Promise.all(values.map(test));
  return values.filter((_, index) => holds[index]);
}

/** A job's landed pages' items enriched, page by page, each page's position checkpointed once its items are. */
async function enrichLanded(deps: WorkFrameDeps, input: EnrichLandedInput): Promise<EnrichLandedResult> {
  const checkpoint = {
    start: (): Progress => ({ page: input.fromPage, items: 0, unenriched: 0, enrichment: { calls: 0, skipped: 0, failed: 0 } }),
    live: (durable: Progress, journal: CallJournal) => ({ credits: journal.charged(), items: 0, pages: 0, enriched: durable.items }),
  };
  return inWorkFrame(deps, input, checkpoint, async (frame) => {
    const { budget } = frame;
    const progress = frame.checkpoint.resumed;
    const enricher = new ItemEnricher({ ...frame.enricherParts, target: input.target });
    const tally = progress.enrichment;
    for (; progress.page <= input.toPage && !enricher.stop; progress.page++) {
      const key = pageLandingKey(input.runId, input.target, progress.page);
      const landing = await deps.store.findLanding(key);
      // A page landJobResults returned is durable: one missing was lost (a damaged disk), and read
      // as empty its items would be left out of a run that says it completed.
      if (landing?.kind !== 'page' || !Array.isArray(landing.data)) throw new Error(`the job results page ${key} is not in ${deps.store.description}: its items cannot be enriched`);
      const items = landing.data as { url?: string }[];
      const urls: string[] = [];
      for (const item of items) {
        if (!item.url) continue;
        if (!budget.tryHold(enricher.worstOf(input.platform, item.url))) {
          progress.unenriched++;
          continue;
        }
        urls.push(item.url);
      }
      await enricher.enrich(input.platform, urls, tally);
      progress.items += urls.length;
      // Durable (and heartbeated) at the frame's next group commit.
      frame.checkpoint.commit({ ...progress, page: progress.page + 1 });
    }
    await frame.durable();
    return { ...(await frame.spent()), items: progress.items, unenriched: progress.unenriched, enrichment: { ...tally }, ...(enricher.stop ? { stop: enricher.stop } : {}) };
  });
}

/**
 * What a piece of work spent, from its journal, for settling its grant when its activity
 * failed for good: landed calls at their charge, calls begun and never landed at their worst.
 */
async function workSpent(store: Store, input: { runId: string; workId: string }): Promise<WorkSpent> {
  const journal = await CallJournal.load(store.journals, input.runId, input.workId);
  try {
    // Counted, not written: the store may be why the work failed.
    for (const key of journal.openKeys()) {
      // A settled key's open intents are attempts whose answers were lost, not its landing's.
      if (journal.isSettled(key)) continue;
      const landing = await store.findLanding(key);
      if (landing?.kind === 'page') journal.countAsSettled(key, landing.call?.credits ?? 0);
    }
    const totals = journal.totals();
    return { credits: totals.credits, lostCalls: totals.lostCalls };
  } finally {
    await journal.close();
  }
}

export function landedEnrichmentActivities({ client, store, dataDir, logger }: { client: SocialApiClient; store: Store; dataDir: string; logger?: Logger }) {
  const deps: WorkFrameDeps = { client, store, ...(logger ? { logger } : {}) };
  /**
   * Whether this run already landed an observation (by an earlier work or attempt, or as a new
   * item's enrichment): tracking holds credits only for what is still to observe.
   */
  const observedInRun = (runId: string, platform: Platform, endpoint: 'stats' | 'channel-stats', subject: string) =>
    store.isLanded(itemLandingKey(runId, platform, endpoint, subject));

  return {
    enrichLanded: (input: EnrichLandedInput) => enrichLanded(deps, input),

    /**
     * Makes again the run's enrichment calls that failed for good (a retry's first work), within
     * its grant. Returns how many it made again; its tally counts those that landed and those
     * that failed again (recorded again, for the next retry).
     */
    async redoFailedCalls(input: RedoFailedInput): Promise<RedoFailedResult> {
      const failures = [...(await runFailures(store.journals, input.runId))].map(([key, failure]) => ({ key, ...failure }));
      return enrichmentWork(deps, input, async (enricherFor, tally) => {
        const attempted = await Promise.all(failures.map((failure) => enricherFor(failure.target).redo(failure, tally)));
        const stillFailed: Record<string, number> = {};
        for (const failure of (await runFailures(store.journals, input.runId)).values()) stillFailed[failure.target] = (stillFailed[failure.target] ?? 0) + 1;
        return { tried: attempted.filter(Boolean).length, stillFailed };
      });
    },

    /**
     * Observes each tracked account's profile once, within its grant: an account already observed
     * in this run (by an earlier attempt) is read back, not bought again.
     */
    async observeAccounts(input: ObserveAccountsInput): Promise<ObserveAccountsResult> {
      return enrichmentWork(deps, input, async (enricherFor, tally, budget) => {
        const enricher = enricherFor(TRACKED_ACCOUNTS_TARGET);
        const pending = await filterAsync(input.accounts, async (account) => !(await observedInRun(input.runId, account.platform, 'channel-stats', account.handle)));
        const observable = pending.filter((account) => budget.tryHold(priceOf(input.prices, account.platform, 'channel-stats')));
        await settleAll(observable.map((account) => enricher.observe(account.platform, 'channel-stats', account.handle, tally)));
        return { unobserved: pending.length - observable.length };
      });
    },

    /**
     * Observes the stats of the tracked items due at `asOfMs`, most overdue first, within its
     * grant: a short grant observes fewer. An item already observed in this run (by an earlier
     * attempt, or enriched as a new item) is read back, not bought again.
     */
    async observeItems(input: ObserveItemsInput): Promise<ObserveItemsResult> {
      // Loaded here, not at the top: DuckDB costs a third of a second to load, which a harvest
      // that tracks no items need not pay.
      const { dueTrackedItems } = await import('../src/warehouse/known-items.js');
      const due = await dueTrackedItems(dataDir, input.targets, input.days, input.asOfMs);
      return enrichmentWork(deps, input, async (enricherFor, tally, budget) => {
        const pending = await filterAsync(due, async ({ item }) => !(await observedInRun(input.runId, item.platform, 'stats', item.url)));
        const observable = pending.filter(({ item }) => budget.tryHold(priceOf(input.prices, item.platform, 'stats')));
        await settleAll(observable.map(({ item }) => enricherFor(item.target).observe(item.platform, 'stats', item.url, tally)));
        const observed: Record<string, number> = {};
        for (const { item } of due) if (await observedInRun(input.runId, item.platform, 'stats', item.url)) observed[item.target] = (observed[item.target] ?? 0) + 1;
        return { observed, unobserved: pending.length - observable.length };
      });
    },

    workSpent: (input: { runId: string; workId: string }) => workSpent(store, input),
  };
}
