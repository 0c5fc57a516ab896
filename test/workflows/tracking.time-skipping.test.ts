/**
 * The run's steps outside the listings (workflows/tracking.ts), on Temporal's time-skipping test
 * server with stubbed activities, driven through `harvestWorkflow` alone: `track-accounts`, each
 * tracked account's profile observed once per run, after the listings, granted their worst case,
 * with works following one another until all are observed or the budget is spent, said so; not
 * again on a retry, nor on a run already stopped; and a retry's `redo-failed`, the enrichment calls
 * that failed for good made again first, in one work granted their worst case, its targets done
 * or failed by what is still failed. `track-items` in its bracket is in
 * harvest-rules.time-skipping.test.ts; tracking on the emulator's clock in tracking.test.ts.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import { resumableState } from '../../src/harvest/checkpoint.js';
import { AUTHENTICATION_ERROR, ENRICHMENT_FAILED, INSUFFICIENT_CREDITS } from '../../src/harvest/failures.js';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { harvestFrom, prices } from '../support/temporal.js';
import { pagesBought, runStubbedHarvest, runStubs, useTimeSkipping, type ListingWorkInput } from '../support/time-skipping.js';

let env: TestWorkflowEnvironment;

useTimeSkipping((started) => (env = started));

const TIKTOK = 'channel:tiktok:first_creator:videos';
const REELS = 'channel:instagram:second_creator:reels';
/** Two accounts: the TikTok channel's, and the Instagram one's whose reels and posts are listed. */
const ACCOUNTS = [
  { platform: 'tiktok', handle: 'first_creator' },
  { platform: 'instagram', handle: 'second_creator' },
];
const ACCOUNTS_WORST = prices['tiktok/channel-stats'] + prices['instagram/channel-stats'];
/** What the three listings spend, without enrichment. */
const LISTINGS = 100 * prices['tiktok/channel-videos'] + 50 * prices['instagram/channel-reels'] + 50 * prices['instagram/channel-posts'];

function trackedHarvest(name: string, budget: number, extra = '') {
  return harvestFrom(`harvests:
  - name: ${name}
    budget: { credits: ${budget} }
    concurrency: { targets: 1, calls: 1 }
    track: { accounts: true${extra.includes('items') ? ', items: { days: 7 }' : ''} }
${extra.includes('enrich') ? '    enrich: { stats: true, transcript: true }\n' : ''}    channels:
      - { platform: tiktok, handle: first_creator, content: videos, max_items: 100 }
      - { platform: instagram, handle: second_creator, content: reels, max_items: 50 }
      - { platform: instagram, handle: second_creator, content: posts, max_items: 50 }
`);
}

interface Observation {
  credits: number;
  unobserved: number;
  stop?: object;
}

/**
 * Stubs of a tracked run: listings land their pages (`listing` may answer otherwise); each work
 * observing the accounts answers the next of `observations` (the last again when they run out);
 * `order` says which works ran, in order, and `grants` what each tracking work was granted.
 */
function trackedRun(observations: Observation[] = [{ credits: ACCOUNTS_WORST, unobserved: 0 }], listing: (input: ListingWorkInput) => Promise<unknown> = async (input) => pagesBought(input), prepared: object = {}) {
  const run = runStubs(prepared);
  const order: string[] = [];
  const grants: number[] = [];
  const observedAccounts: unknown[] = [];
  const activities = {
    ...run.activities,
    harvestTarget: async (input: ListingWorkInput) => {
      order.push(`list ${input.target.key}`);
      return listing(input);
    },
    observeAccounts: async (input: { grant: number; accounts: unknown[] }) => {
      order.push('observe accounts');
      grants.push(input.grant);
      observedAccounts.push(input.accounts);
      const observation = observations[Math.min(grants.length - 1, observations.length - 1)]!;
      return { credits: observation.credits, lostCalls: 0, enrichment: { calls: observation.credits / 3, skipped: 0, failed: 0 }, unobserved: observation.unobserved, ...(observation.stop ? { stop: observation.stop } : {}) };
    },
    observeItems: async (input: { grant: number }) => {
      order.push('observe items');
      grants.push(input.grant);
      return { credits: 10, lostCalls: 0, enrichment: { calls: 10, skipped: 0, failed: 0 }, unobserved: 0, observed: { [TIKTOK]: 10 } };
    },
  };
  return { activities, order, grants, observedAccounts, paused: run.paused };
}

const listedAll = (order: string[]) => order.filter((work) => work.startsWith('list '));

describe('track-accounts', () => {
  it("observes each tracked account once, after every listing, in one work granted their profiles' worst case", async () => {
    const stub = trackedRun();
    const summary = await runStubbedHarvest(env, 'track-accounts', stub.activities, { harvest: trackedHarvest('track-accounts', 100_000) });
    expect(stub.order).toEqual([...listedAll(stub.order), 'observe accounts']);
    expect(listedAll(stub.order)).toHaveLength(3);
    expect(stub.grants).toEqual([ACCOUNTS_WORST]);
    expect(stub.observedAccounts).toEqual([ACCOUNTS]);
    expect(summary.status).toBe('completed');
    expect(summary.enrichment.calls).toBe(ACCOUNTS_WORST / 3);
  }, 30_000);

  it('a work that left accounts unobserved is followed by another, granted what is free; one that bought nothing ends the run out of budget, saying how many', async () => {
    const stub = trackedRun([
      { credits: 3, unobserved: 1 },
      { credits: 0, unobserved: 1 },
    ]);
    // Room for the listings and one account's profile more than their worst case.
    const budget = LISTINGS + ACCOUNTS_WORST + 3;
    const summary = await runStubbedHarvest(env, 'track-accounts-short', stub.activities, { harvest: trackedHarvest('track-accounts-short', budget) });
    expect(stub.grants).toEqual([ACCOUNTS_WORST, ACCOUNTS_WORST]);
    expect(summary).toMatchObject({ status: 'budget_exhausted', reason: '1 tracked accounts were not observed: the budget ran out' });

    const tight = trackedRun([
      { credits: 3, unobserved: 1 },
      { credits: 3, unobserved: 0 },
    ]);
    // Once the first work spent 3, only 3 are free: the next work is granted them, not the worst case.
    const last = await runStubbedHarvest(env, 'track-accounts-tight', tight.activities, { harvest: trackedHarvest('track-accounts-tight', LISTINGS + ACCOUNTS_WORST) });
    expect(tight.grants).toEqual([ACCOUNTS_WORST, ACCOUNTS_WORST - 3]);
    expect(last.status).toBe('completed');
  }, 30_000);

  it('is not observed again by a retry, nor by a run already stopped', async () => {
    let first = true;
    const failingOnce = async (input: ListingWorkInput) => {
      if (input.target.key === REELS && first) {
        first = false;
        throw ApplicationFailure.nonRetryable('the channel is gone', 'NotFound');
      }
      return pagesBought(input);
    };
    const tracking = { tracking: { asOfMs: 0, due: { [TIKTOK]: 10 }, credits: 100 } };
    const stub = trackedRun(undefined, failingOnce, tracking);
    const harvest = trackedHarvest('track-once', 100_000, 'items');
    const summary = await runStubbedHarvest(env, 'track-once', stub.activities, { harvest });
    expect(summary.status).toBe('completed_with_errors');
    expect(stub.order.filter((work) => !work.startsWith('list '))).toEqual(['observe accounts', 'observe items']);

    const retry = trackedRun(undefined, failingOnce, tracking);
    const retried = await runStubbedHarvest(env, 'track-once-retry', retry.activities, { harvest, resume: resumableState(summary.checkpoint, 100_000) });
    expect(retry.order).toEqual([`list ${REELS}`]);
    expect(retried).toMatchObject({ status: 'completed', trackedItems: { due: 10, observed: 10 } });

    const stopped = trackedRun(undefined, async () => Promise.reject(ApplicationFailure.nonRetryable('the account has 2 credits left', INSUFFICIENT_CREDITS)), tracking);
    const paused = await runStubbedHarvest(env, 'track-stopped', stopped.activities, { harvest });
    expect(paused.status).toBe('paused');
    expect(stopped.order).toEqual([`list ${TIKTOK}`]);
  }, 30_000);
});

describe("a retry's redo-failed", () => {
  /** The most one of the harvest's items' enrichment costs: an Instagram reel's stats and transcript (a TikTok video's, a photo post's and a profile's cost less). */
  const ITEM_WORST = prices['instagram/stats'] + prices['instagram/transcript'];
  const FAILED_CALLS = 2;

  /** A first run whose TikTok target's items had FAILED_CALLS enrichment calls fail for good. */
  async function withFailedCalls(name: string): Promise<{ harvest: ReturnType<typeof trackedHarvest>; summary: HarvestSummary }> {
    const harvest = trackedHarvest(name, 100_000, 'enrich');
    const stub = trackedRun(undefined, async (input) => {
      const listed = pagesBought(input);
      return input.target.key === TIKTOK ? { ...listed, enrichment: { calls: 98, skipped: 0, failed: FAILED_CALLS } } : listed;
    });
    const summary = await runStubbedHarvest(env, name, stub.activities, { harvest });
    expect(summary.targets[0]).toMatchObject({ key: TIKTOK, status: 'failed', error: { type: ENRICHMENT_FAILED } });
    expect(summary.status).toBe('completed_with_errors');
    return { harvest, summary };
  }

  /** A retry whose redo work answers `redo`; what it was granted, and the retry's works in order. */
  async function retried(name: string, first: { harvest: ReturnType<typeof trackedHarvest>; summary: HarvestSummary }, redo: () => Promise<unknown>) {
    const stub = trackedRun();
    const grants: number[] = [];
    const activities = {
      ...stub.activities,
      redoFailedCalls: async (input: { grant: number }) => {
        stub.order.push('redo failed calls');
        grants.push(input.grant);
        return redo();
      },
    };
    const summary = await runStubbedHarvest(env, name, activities, { harvest: first.harvest, resume: resumableState(first.summary.checkpoint, 100_000) });
    return { summary, grants, order: stub.order };
  }

  it('makes the failed calls again first, in one work granted their worst case: what lands is no longer failed', async () => {
    const first = await withFailedCalls('redo-all');
    const retry = await retried('redo-all-retry', first, async () => ({ credits: ITEM_WORST, lostCalls: 0, tried: FAILED_CALLS, stillFailed: {}, enrichment: { calls: FAILED_CALLS, skipped: 0, failed: 0 } }));
    expect(retry.order).toEqual(['redo failed calls']);
    expect(retry.grants).toEqual([FAILED_CALLS * ITEM_WORST]);
    expect(retry.summary.targets[0]).toMatchObject({ key: TIKTOK, status: 'done' });
    expect(retry.summary).toMatchObject({ status: 'completed', enrichment: { failed: 0 } });
  }, 30_000);

  it('a call that fails again leaves its target failed, saying how many; a redo that fails for good leaves them as they were, and a refused key fails the run', async () => {
    const first = await withFailedCalls('redo-some');
    const again = await retried('redo-some-retry', first, async () => ({ credits: 3, lostCalls: 0, tried: FAILED_CALLS, stillFailed: { [TIKTOK]: 1 }, enrichment: { calls: 1, skipped: 0, failed: 1 } }));
    expect(again.summary.targets[0]).toMatchObject({ status: 'failed', error: { type: ENRICHMENT_FAILED, message: expect.stringMatching(/^1 enrichment call of its items failed for good/) } });
    expect(again.summary).toMatchObject({ status: 'completed_with_errors', enrichment: { failed: 1 } });

    const broken = await retried('redo-broken-retry', first, async () => Promise.reject(ApplicationFailure.nonRetryable('the journal is unreadable', 'JournalDamaged')));
    expect(broken.summary.targets[0]).toMatchObject({ status: 'failed', error: { type: ENRICHMENT_FAILED, message: expect.stringMatching(/^2 enrichment calls/) } });
    expect(broken.summary.status).toBe('completed_with_errors');
    expect(broken.summary.reason).toBeUndefined();

    const refused = await retried('redo-refused-retry', first, async () => Promise.reject(ApplicationFailure.nonRetryable('401', AUTHENTICATION_ERROR)));
    expect(refused.summary).toMatchObject({ status: 'failed', reason: 'the API refused the key: 401' });
  }, 30_000);
});
