/**
 * The run's steps outside the listings (src/harvest/spend-order.ts): `redo-failed`, a retry's
 * failed enrichment calls made again first, and `track-accounts` and `track-items`, last.
 */
import { log } from '@temporalio/workflow';
import type { WorkStop } from '../src/harvest/failures.js';
import type { WorkSpent } from '../activities/landed-enrichment.js';
import { addTally, type EnrichmentTally } from '../src/harvest/enrichment-tally.js';
import { availableCredits, finishListing } from '../src/harvest/run-state.js';
import { accountsWorst, itemEnrichmentWorst, listsPhotoPosts, trackedAccounts } from '../src/harvest/rules.js';
import { grantedWork, type WorkInput } from './bracket.js';
import { failureType, messageOf, observeAccounts, observeItems, redoFailedCalls, type RunContext } from './run-context.js';
import { recordWorkStop, stopForBudget, stopForCredits, stopOnRunStoppingError } from './stops.js';

/**
 * The `redo-failed` step of a retry: the enrichment calls that failed for good in the run so far,
 * made again within one grant of their worst case. Those that land are no longer failed.
 */
export async function redoFailed(run: RunContext): Promise<void> {
  const { state } = run;
  if (!state.redoFailedCalls) return;
  state.redoFailedCalls = false;
  const outcome = await grantedWork(run, 'redo-failed-calls', state.enrichment.failed * dearestItemEnrichment(run), redoFailedCalls, {});
  if (!outcome.ok) {
    log.warn('failed enrichment calls could not be made again', { message: messageOf(outcome.error) });
    stopOnRunStoppingError(state, failureType(outcome.error), messageOf(outcome.error));
    // Their targets stay failed, as the run before left them.
    for (const target of state.targets) if (target.listed) finishListing(target);
    return;
  }
  const { result } = outcome;
  // The journals are the record of failed calls; a count kept before they were is never below zero.
  state.enrichment.failed = Math.max(0, state.enrichment.failed - result.tried);
  addTally(state.enrichment, result.enrichment);
  for (const target of state.targets) {
    if (!target.listed) continue;
    target.failedCalls = result.stillFailed[target.plan.key] ?? 0;
    finishListing(target);
  }
  if (result.stop?.status === 'paused') await stopForCredits(state, result.stop.error.message);
}

/** The most one item's enrichment, or one tracked account's profile, costs in this harvest: a bound on what one failed call costs again. */
function dearestItemEnrichment(run: RunContext): number {
  const { prices } = run.state;
  return Math.max(
    ...run.state.targets.map((target) => itemEnrichmentWorst(prices, target.plan.platform, run.harvest.enrich, listsPhotoPosts(target.plan))),
    // A tracked account's profile is such a call too (`track.accounts`).
    ...trackedAccounts(run.harvest).map((account) => accountsWorst(prices, [account])),
  );
}

/** The `track-accounts` step: each tracked account's profile observed once (`track.accounts`), granted their worst case. */
export async function observeTrackedAccounts(run: RunContext): Promise<void> {
  const accounts = trackedAccounts(run.harvest);
  if (run.state.stopped || run.state.accountsObserved || accounts.length === 0) return;
  const result = await trackingWorks(run, 'accounts', accountsWorst(run.state.prices, accounts), observeAccounts, { accounts });
  if (result) run.state.accountsObserved = true;
}

/**
 * The `track-items` step: the stats of the tracked items due when the run started (`track.items`),
 * granted what prepareRun forecast for them, most overdue first.
 */
export async function observeTrackedItems(run: RunContext): Promise<void> {
  const forecast = run.state.tracking;
  if (run.state.stopped || !forecast || run.state.itemsObserved !== undefined) return;
  const targets = run.state.targets.map((target) => target.plan);
  const result = await trackingWorks(run, 'items', forecast.credits, observeItems, { targets, days: run.harvest.track!.items!.days, asOfMs: forecast.asOfMs });
  if (result) run.state.itemsObserved = Object.values(result.observed).reduce((sum: number, count) => sum + count, 0);
}

type TrackingResult = WorkSpent & { enrichment: EnrichmentTally; unobserved: number; stop?: WorkStop };

/**
 * Tracking works until all is observed: a work that left some unobserved (its grant spent, as
 * when calls a killed worker left open count at their worst case) is followed by another for the
 * rest, while the budget has room and the last one bought something; then what is left is left,
 * and the run says so. Undefined when a work failed for good (the run then stops, saying why).
 */
async function trackingWorks<I extends object, R extends TrackingResult>(run: RunContext, what: 'accounts' | 'items', worst: number, observe: (input: I & WorkInput) => Promise<R>, input: I): Promise<R | undefined> {
  const { state } = run;
  for (;;) {
    const outcome = await grantedWork(run, `track-${what}`, worst, observe, input);
    if (!outcome.ok) {
      log.warn(`tracked ${what} could not be observed`, { message: messageOf(outcome.error) });
      await recordWorkStop(state, { status: 'failed', error: { type: failureType(outcome.error), message: messageOf(outcome.error) } }, `tracked ${what} could not be observed`);
      return undefined;
    }
    const { result } = outcome;
    addTally(state.enrichment, result.enrichment);
    if (result.stop) await recordWorkStop(state, result.stop, 'tracking stopped');
    if (result.stop || result.unobserved === 0) return result;
    if (result.credits === 0 || availableCredits(state.budget) === 0) {
      stopForBudget(state, `${result.unobserved} tracked ${what} were not observed`);
      return result;
    }
  }
}
