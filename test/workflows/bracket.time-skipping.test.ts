/**
 * The bracket every piece of a run's work goes through (workflows/bracket.ts), on Temporal's
 * time-skipping test server with stubbed activities, driven through `harvestWorkflow` alone:
 * each work granted its worst case or what is free, reserved while it runs, and settled with what
 * it spent, so the rest of its grant is free again; a work that fails for good settled from its
 * own journal; a journal that cannot be read counted at the work's whole grant, named in the
 * checkpoint, and corrected by a retry that reads it (`correctCountedAtWorst`), or kept for the
 * next retry while it still cannot be read. The real journals behind `workSpent` are tested on the
 * emulator (outages.test.ts, answer-faults.test.ts); this file shows the arithmetic.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import { resumableState } from '../../src/harvest/checkpoint.js';
import { harvestFrom } from '../support/temporal.js';
import { PAGE_CREDITS, PAGE_ITEMS, pagesBought, runStubbedHarvest, runStubs, useTimeSkipping, type ListingWorkInput } from '../support/time-skipping.js';

let env: TestWorkflowEnvironment;

useTimeSkipping((started) => (env = started));

/** A harvest of TikTok channels' videos (`handle: max_items`), paged, `targets` listed at once. */
function channels(name: string, budget: number, maxItems: Record<string, number>, targets: number) {
  const lines = Object.entries(maxItems).map(([handle, max]) => `      - { platform: tiktok, handle: ${handle}, content: videos, max_items: ${max} }`);
  return harvestFrom(`harvests:\n  - name: ${name}\n    budget: { credits: ${budget} }\n    concurrency: { targets: ${targets}, calls: 1 }\n    channels:\n${lines.join('\n')}\n`);
}

const keyOf = (handle: string) => `channel:tiktok:${handle}:videos`;

interface Work {
  target: string;
  grant: number;
  workId: string;
}

/**
 * A stubbed `harvestTarget` that records each work and answers with `answer` (a listing result,
 * or a throw). The run's first work waits (real time, 5 s at most) until `together` works have
 * started, so that works the workflow starts together are in flight together however slowly the
 * machine hands them out.
 */
function listingWorks(answer: (input: ListingWorkInput, works: Work[]) => unknown, together = 1) {
  const works: Work[] = [];
  const harvestTarget = async (input: ListingWorkInput) => {
    works.push({ target: input.target.key, grant: input.grant, workId: input.workId });
    if (works.length === 1) for (let waited = 0; works.length < together && waited < 5_000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10));
    return answer(input, works);
  };
  return { harvestTarget, works, grants: (handle: string) => works.filter((work) => work.target === keyOf(handle)).map((work) => work.grant) };
}

describe('grant and settle', () => {
  it('grants each work its worst case or what is free, never more together than the budget, and settles it with what it spent: the rest is free again', async () => {
    // 450 credits for two channels of 100 items (300 at worst each), listed at once. The first is
    // granted its worst case and finds a list of 20 items; the second gets the 150 left, lands a
    // page, and its next work gets what the first did not spend.
    const run = runStubs();
    const listing = listingWorks((input) => pagesBought(input, input.target.key === keyOf('short_list') ? 20 : Number.POSITIVE_INFINITY), 2);
    const summary = await runStubbedHarvest(env, 'bracket-settle', { ...run.activities, harvestTarget: listing.harvestTarget }, { harvest: channels('bracket-settle', 450, { short_list: 100, long_list: 100 }, 2) });
    expect(listing.grants('short_list')).toEqual([2 * PAGE_CREDITS]);
    expect(listing.grants('long_list')).toEqual([PAGE_CREDITS, PAGE_CREDITS]);
    expect(summary.status).toBe('completed');
    expect(summary.targets.map((target) => [target.status, target.items, target.credits])).toEqual([
      ['done', 20, 20 * 3],
      ['done', 2 * PAGE_ITEMS, 2 * PAGE_CREDITS],
    ]);
    expect(summary).toMatchObject({ creditsSpent: 20 * 3 + 2 * PAGE_CREDITS, creditsReserved: 0 });
    // Each work under a work id of its own: its own journal.
    expect(new Set(listing.works.map((work) => work.workId)).size).toBe(3);
    expect(run.finished).toEqual([{ status: 'completed', creditsSpent: 20 * 3 + 2 * PAGE_CREDITS }]);
  }, 60_000);

  it('settles a work that failed for good with what its own journal says it spent, lost calls included, and frees the rest of its grant', async () => {
    const run = runStubs();
    const journalsRead: string[] = [];
    const listing = listingWorks((input) => {
      if (input.target.key === keyOf('gone')) throw ApplicationFailure.nonRetryable('the channel is gone', 'NotFound');
      return pagesBought(input);
    });
    const activities = {
      ...run.activities,
      harvestTarget: listing.harvestTarget,
      workSpent: async (input: { workId: string }) => {
        journalsRead.push(input.workId);
        return { credits: 40, lostCalls: 2 };
      },
    };
    // 500 credits: the failed work is granted 300, spends 40 of them; the next target wants 600.
    const summary = await runStubbedHarvest(env, 'bracket-failed', activities, { harvest: channels('bracket-failed', 500, { gone: 100, after: 200 }, 1) });
    expect(journalsRead).toEqual([listing.works[0]!.workId]);
    expect(summary.targets[0]).toMatchObject({ status: 'failed', credits: 40, error: { type: 'NotFound' } });
    expect(summary.callsLost).toBe(2);
    // What the failed work did not spend went back to the budget: the next work is granted it.
    // (and its last work the 10 credits left, which buy nothing: the target ends budget_exhausted).
    expect(listing.grants('after')).toEqual([500 - 40, 10]);
    expect(summary).toMatchObject({ status: 'budget_exhausted', creditsSpent: 40 + 3 * PAGE_CREDITS, creditsReserved: 0 });
  }, 60_000);
});

describe('a journal that cannot be read', () => {
  /**
   * Stubs of a run (or a retry) whose `journal` answers workSpent (or throws); on a first run
   * (`failing`), the first target's work fails for good, on a retry it lists its channel whole.
   * `order` says which works ran and which journals were read, in order.
   */
  function journalRun(journal: (workId: string) => { credits: number; lostCalls: number }, failing: boolean) {
    const run = runStubs();
    const journalsRead: string[] = [];
    const order: string[] = [];
    const listing = listingWorks((input) => {
      order.push(`list ${input.target.key}`);
      if (failing && input.target.key === keyOf('unlucky')) throw ApplicationFailure.nonRetryable('the data directory cannot be written', 'DiskGone');
      return pagesBought(input);
    });
    const workSpent = async (input: { workId: string }) => {
      journalsRead.push(input.workId);
      order.push(`journal ${input.workId}`);
      return journal(input.workId);
    };
    return { activities: { ...run.activities, harvestTarget: listing.harvestTarget, workSpent }, listing, journalsRead, order };
  }
  const unreadable = (): never => {
    throw ApplicationFailure.nonRetryable('the catalog cannot be reached', 'CatalogUnavailable');
  };
  const harvest = channels('bracket-journal', 10_000, { unlucky: 100, lucky: 100 }, 1);

  it("counts the work at its whole grant and names it in the checkpoint; a retry reads the journal again and corrects the run's and the target's credits", async () => {
    const first = journalRun(unreadable, true);
    const summary = await runStubbedHarvest(env, 'bracket-unread', first.activities, { harvest });
    const failedWork = first.listing.works[0]!;
    expect(failedWork.grant).toBe(2 * PAGE_CREDITS);
    expect(summary.targets[0]).toMatchObject({ status: 'failed', credits: 2 * PAGE_CREDITS, error: { type: 'DiskGone' } });
    expect(summary).toMatchObject({ status: 'completed_with_errors', creditsSpent: 4 * PAGE_CREDITS, creditsReserved: 0 });
    expect(summary.checkpoint.countedAtWorst).toEqual([{ workId: failedWork.workId, counted: 2 * PAGE_CREDITS, target: keyOf('unlucky') }]);

    // The retry: the journal now says the work spent 40 credits and lost a call.
    const retry = journalRun(() => ({ credits: 40, lostCalls: 1 }), false);
    const retried = await runStubbedHarvest(env, 'bracket-unread-retry', retry.activities, { harvest, resume: resumableState(summary.checkpoint, 10_000) });
    // Read first, before the retry's own works, and only that work's journal.
    expect(retry.order).toEqual([`journal ${failedWork.workId}`, `list ${keyOf('unlucky')}`]);
    expect(retried.checkpoint.countedAtWorst).toBeUndefined();
    // 260 credits counted that were not spent are taken back, from the run and from the target
    // (which the retry then listed whole), and the lost call is counted.
    expect(retried.targets[0]).toMatchObject({ status: 'done', items: 100, credits: 40 + 2 * PAGE_CREDITS });
    expect(retried).toMatchObject({ status: 'completed', creditsSpent: 40 + 4 * PAGE_CREDITS, creditsReserved: 0, callsLost: 1 });
  }, 60_000);

  it('a retry that still cannot read it keeps it counted as it was, for the next retry, which corrects it', async () => {
    const first = journalRun(unreadable, true);
    const summary = await runStubbedHarvest(env, 'bracket-unread-twice', first.activities, { harvest });
    const counted = summary.checkpoint.countedAtWorst;
    expect(counted).toHaveLength(1);

    const stillUnreadable = journalRun(unreadable, false);
    const retried = await runStubbedHarvest(env, 'bracket-unread-twice-retry', stillUnreadable.activities, { harvest, resume: resumableState(summary.checkpoint, 10_000) });
    expect(stillUnreadable.journalsRead).toEqual([counted![0]!.workId]);
    expect(retried.checkpoint.countedAtWorst).toEqual(counted);
    // Still counted at its whole grant (the failed work's 300, the retry's 300 and the other target's 300).
    expect(retried.targets[0]).toMatchObject({ status: 'done', credits: 2 * 2 * PAGE_CREDITS });
    expect(retried.creditsSpent).toBe(3 * 2 * PAGE_CREDITS);

    const readable = journalRun(() => ({ credits: 0, lostCalls: 0 }), false);
    const corrected = await runStubbedHarvest(env, 'bracket-unread-twice-again', readable.activities, { harvest, resume: resumableState(retried.checkpoint, 10_000) });
    expect(readable.journalsRead).toEqual([counted![0]!.workId]);
    expect(readable.listing.works).toEqual([]);
    expect(corrected.checkpoint.countedAtWorst).toBeUndefined();
    expect(corrected.targets[0]).toMatchObject({ status: 'done', credits: 2 * PAGE_CREDITS });
    expect(corrected).toMatchObject({ status: 'completed', creditsSpent: 2 * 2 * PAGE_CREDITS });
  }, 60_000);
});
