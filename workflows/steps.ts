/**
 * The run walks the table of steps `harvester plan` forecasts by (SPEND_STEPS in
 * src/harvest/spend-order.ts): one runner per step name, so a step added to the table and not
 * given a runner fails the typecheck. `first` steps run once in order, the `together` steps run per
 * target in one loop (several targets at once), and `last` steps run once after it.
 */
import { workflowInfo } from '@temporalio/workflow';
import { availableCredits, type TargetState } from '../src/harvest/run-state.js';
import { targetWorst } from '../src/harvest/rules.js';
import { mayEnrichJobItems, mayList, SPEND_STEPS, type SpendStep, type StepName } from '../src/harvest/spend-order.js';
import { enrichJobPages, finishTargetJob, jobEnrichmentWorst, startJobs } from './jobs.js';
import { listTarget } from './listing.js';
import { logTargetFinished, showStatus, type RunContext } from './run-context.js';
import { stopForBudget } from './stops.js';
import { observeTrackedAccounts, observeTrackedItems, redoFailed } from './tracking.js';

/** What the loop of `together` steps knows while it picks each target's next work. */
interface Loop {
  /** Paged listings in flight, or started in this pass: at most `run.targets`. */
  listing: number;
  /** A listing is in flight or still to start: the jobs' items wait unless what is free covers them. */
  listingsLeft: boolean;
}

type Work = () => Promise<void>;

type StepRunner = { runs: 'first' | 'last'; run(run: RunContext): Promise<void> } | { runs: 'together'; next(run: RunContext, target: TargetState, loop: Loop): Work | undefined };

const RUNNERS: { [Step in StepName]: StepRunner } = {
  jobs: { runs: 'first', run: startJobs },
  'redo-failed': { runs: 'first', run: redoFailed },
  list: { runs: 'together', next: nextListing },
  enrich: { runs: 'together', next: nextEnrichment },
  'track-accounts': { runs: 'last', run: observeTrackedAccounts },
  'track-items': { runs: 'last', run: observeTrackedItems },
};

/** A target's next piece of listing: its job's results once the job is done, or its next pages while the next item fits. */
function nextListing(run: RunContext, target: TargetState, loop: Loop): Work | undefined {
  if (target.status !== 'pending') return undefined;
  if (target.jobId !== undefined) return () => finishTargetJob(run, target);
  if (loop.listing >= run.targets || !mayList(availableCredits(run.state.budget), targetWorst(run.state.prices, target.plan, run.harvest.enrich, 1))) return undefined;
  loop.listing++;
  return () => listTarget(run, target);
}

/** The enrichment of the items a target's job listed, when the spend order lets it start now. */
function nextEnrichment(run: RunContext, target: TargetState, loop: Loop): Work | undefined {
  if (!target.unenrichedPages || !mayEnrichJobItems(availableCredits(run.state.budget), jobEnrichmentWorst(run, target), loop.listingsLeft)) return undefined;
  return () => enrichJobPages(run, target);
}

/**
 * Walks the steps in spend order. `drain()` says when the history should continue as new: the
 * loop then starts nothing more, waits for what is in flight, and says 'continue' when work is left.
 */
export async function walkSteps(run: RunContext, drain: () => boolean): Promise<'done' | 'continue'> {
  for (const [index, step] of SPEND_STEPS.entries()) {
    const runner = RUNNERS[step.name];
    if (runner.runs !== step.runs) throw new Error(`step ${step.name} runs ${step.runs} in the table, ${runner.runs} in the workflow`);
    if (runner.runs !== 'together') await runner.run(run);
    // The together steps run as one loop, entered at the first of them.
    else if (SPEND_STEPS[index - 1]?.runs !== 'together' && (await runTogether(run, togetherSteps(), drain)) === 'continue') return 'continue';
  }
  return 'done';
}

function togetherSteps(): ((run: RunContext, target: TargetState, loop: Loop) => Work | undefined)[] {
  return SPEND_STEPS.filter((step: SpendStep) => step.runs === 'together').map((step) => {
    const runner = RUNNERS[step.name];
    return runner.runs === 'together' ? runner.next : () => undefined;
  });
}

/**
 * Runs the `together` steps with up to `targets` listings in flight, each target's next work its
 * first step's in table order, until nothing is left to do, or until `drain()` says the history
 * should continue as new: then it starts nothing more and waits for what is in flight.
 */
async function runTogether(run: RunContext, steps: ReturnType<typeof togetherSteps>, drain: () => boolean): Promise<'done' | 'continue'> {
  const { state } = run;
  const inFlight = new Map<TargetState, Promise<void>>();
  const launch = (target: TargetState, work: Work) => {
    const running = work().finally(() => {
      inFlight.delete(target);
      if (target.status !== 'pending' && !target.unenrichedPages) logTargetFinished(state, target);
    });
    inFlight.set(target, running);
  };
  for (;;) {
    if (drain()) {
      await Promise.all(inFlight.values());
      return state.targets.some((target) => target.status === 'pending' || target.unenrichedPages) && !state.stopped ? 'continue' : 'done';
    }
    const listing = [...inFlight.keys()].filter((target) => target.jobId === undefined).length;
    const loop: Loop = { listing, listingsLeft: listing > 0 || state.targets.some((target) => target.status === 'pending' && target.jobId === undefined) };
    for (const target of state.targets) {
      if (state.stopped || inFlight.has(target)) continue;
      for (const next of steps) {
        const work = next(run, target, loop);
        if (work) {
          launch(target, work);
          break;
        }
      }
    }
    showStatus(state);
    if (inFlight.size === 0) break;
    await Promise.race(inFlight.values());
  }
  // Nothing in flight and nothing could start: what is still pending found no budget left.
  for (const target of state.targets) {
    if (target.status === 'pending' && !state.stopped) {
      target.status = 'budget_exhausted';
      logTargetFinished(state, target);
    }
    if (target.unenrichedPages) stopForBudget(state, `the items ${target.plan.key} listed were not enriched`);
  }
  return 'done';
}

/** Whether the history should continue as new: Temporal suggests it, or a test's limit is reached. */
export function historyFull(historyLimit: number | undefined): () => boolean {
  return () => workflowInfo().continueAsNewSuggested || (historyLimit !== undefined && workflowInfo().historyLength > historyLimit);
}
