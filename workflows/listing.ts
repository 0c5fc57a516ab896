/**
 * The `list` step of a paged target (src/harvest/spend-order.ts): one piece of its listing at a
 * time, each granted what the target's remaining items may cost and settled with what it spent.
 */
import type { TargetWorkResult } from '../activities/target-work.js';
import { addTally } from '../src/harvest/enrichment-tally.js';
import { finishListing, type TargetState } from '../src/harvest/run-state.js';
import { targetWorst } from '../src/harvest/rules.js';
import { grantedWork } from './bracket.js';
import { harvestTarget, progressOfFailedWork, type RunContext } from './run-context.js';
import { recordFailure, recordStop, warnEmpty } from './stops.js';

/** One piece of a target's listing: granted what its remaining items may cost, settled with what it spent. */
export async function listTarget(run: RunContext, target: TargetState): Promise<void> {
  const { state } = run;
  const { plan } = target;
  const worst = targetWorst(state.prices, plan, run.harvest.enrich, plan.maxItems - target.items);
  const outcome = await grantedWork(run, plan.key, worst, harvestTarget, { target: plan, pageSize: run.pageSize, from: target.position, stopAtIds: target.knownIds }, target);
  if (!outcome.ok) {
    // What the work had durably reached (landed, enriched, journaled) stands: its position, pages
    // and items, which a retry resumes from, instead of the listing's start.
    const reached = progressOfFailedWork(outcome.error);
    if (reached) {
      target.position = reached.position;
      target.pages += reached.pagesLanded;
      target.items = reached.position.items;
    }
    await recordFailure(state, target, outcome.error);
    return;
  }
  await listed(run, target, outcome.result);
}

/** Where a piece of listing leaves its target: done, stopped, out of budget, or pending for the next piece. */
async function listed(run: RunContext, target: TargetState, result: TargetWorkResult): Promise<void> {
  const { state } = run;
  target.position = result.position;
  target.pages += result.pagesLanded;
  target.items = result.position.items;
  addTally(state.enrichment, result.enrichment);
  target.failedCalls = (target.failedCalls ?? 0) + result.enrichment.failed;
  if (result.status === 'done') {
    // The list ended without a single item: said as a warning, the run goes on as usual.
    const empty = result.ended === 'list_end' && target.items === 0;
    if (empty) warnEmpty(state, target);
    finishListing(target, empty);
  } else if (result.status === 'failed' || result.status === 'paused' || result.status === 'budget_exhausted') await recordStop(state, target, result.status, result.error!);
  // A work that could buy nothing at all with its grant: granting the same again would loop.
  else if (result.credits === 0 && result.pagesLanded === 0) target.status = 'budget_exhausted';
  // Otherwise (grant_spent) the target stays pending, and goes on when the budget has room for another item.
}
