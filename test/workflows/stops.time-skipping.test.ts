/**
 * Why a target or a run stops (workflows/stops.ts, over src/harvest/failures.ts and run-state.ts's
 * `stopRun`), on Temporal's time-skipping test server with stubbed activities, driven through
 * `harvestWorkflow` alone: each kind of stop said as the run's status and reason, once; a 402
 * pausing the run and its schedule; errors no target can get past stopping the run, others only
 * their target; the first stop's reason standing; a stopped run starting no more work. The real
 * failures behind them are tested on the emulator (listing-faults.test.ts, wrong-api.test.ts,
 * full-disk-calls.test.ts, budgets-across-runs.test.ts); this file shows the rules.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import { AUTHENTICATION_ERROR, BUDGET_SPENT, DATA_DIR_NOT_WRITABLE, INSUFFICIENT_CREDITS, NETWORK_ERROR, WRONG_API, WRONG_API_REASON } from '../../src/harvest/failures.js';
import { harvestFrom } from '../support/temporal.js';
import { PAGE_CREDITS, pagesBought, runStubbedHarvest, runStubs, useTimeSkipping, type ListingWorkInput } from '../support/time-skipping.js';

let env: TestWorkflowEnvironment;

useTimeSkipping((started) => (env = started));

const FIRST = 'channel:tiktok:first_creator:videos';

/** Two TikTok channels of 100 videos, paged, `targets` listed at once; `extra` lines added to the harvest. */
function twoChannels(name: string, targets: number, extra = '') {
  return harvestFrom(`harvests:
  - name: ${name}
    budget: { credits: 10000 }
    concurrency: { targets: ${targets}, calls: 1 }
${extra}    channels:
      - { platform: tiktok, handle: first_creator, content: videos, max_items: 100 }
      - { platform: tiktok, handle: second_creator, content: videos, max_items: 100 }
`);
}

/** A run whose first target's work answers `first` (its second's lists its channel whole); what each listed. */
function stubs(first: (input: ListingWorkInput) => Promise<unknown>, second: (input: ListingWorkInput) => Promise<unknown> = async (input) => pagesBought(input)) {
  const run = runStubs();
  const listed: string[] = [];
  const harvestTarget = async (input: ListingWorkInput) => {
    listed.push(input.target.key);
    return input.target.key === FIRST ? first(input) : second(input);
  };
  return { activities: { ...run.activities, harvestTarget }, listed, paused: run.paused, finished: run.finished };
}

/** A harvest's name (and workflow id) for a test of `what`: lowercase letters, digits and -. */
const nameFor = (what: string) => `stops-${what.replace(/([a-z])([A-Z])/g, '$1-$2').replace(/_/g, '-').toLowerCase()}`;

const failing = (type: string, message: string, details?: object) => async (): Promise<never> => {
  throw ApplicationFailure.create({ type, message, nonRetryable: true, ...(details ? { details: [details] } : {}) });
};

describe('a work that fails for good', () => {
  it.each([
    { type: AUTHENTICATION_ERROR, message: '401: the key sk_…abcd is not valid', reason: 'the API refused the key: 401: the key sk_…abcd is not valid' },
    { type: NETWORK_ERROR, message: 'connect ECONNREFUSED 127.0.0.1:9', reason: 'the API cannot be reached: connect ECONNREFUSED 127.0.0.1:9' },
    { type: DATA_DIR_NOT_WRITABLE, message: 'EROFS: read-only file system', reason: 'the data directory cannot be written: EROFS: read-only file system' },
    // A message that says why already is said once, not prefixed again.
    { type: WRONG_API, message: `${WRONG_API_REASON}: it serves http://127.0.0.1:1`, reason: `${WRONG_API_REASON}: it serves http://127.0.0.1:1` },
  ])('$type: no other target can get past it, so the run fails at once, saying why once, and starts nothing more', async ({ type, message, reason }) => {
    const stub = stubs(failing(type, message));
    const summary = await runStubbedHarvest(env, nameFor(type), stub.activities, { harvest: twoChannels(nameFor(type), 1) });
    expect(summary).toMatchObject({ status: 'failed', reason, creditsSpent: 0 });
    expect(summary.targets[0]).toMatchObject({ status: 'failed', error: { type, message } });
    // Listed one at a time: the second target's work was never started.
    expect(stub.listed).toEqual([FIRST]);
    expect(summary.targets[1]!.status).toBe('pending');
    expect(stub.paused).toEqual([]);
    expect(stub.finished).toEqual([{ status: 'failed', creditsSpent: 0 }]);
  }, 60_000);

  it("any other failure fails only its target, with the API's request id: the others complete, and the run completes with errors", async () => {
    const stub = stubs(failing('NotFound', 'the channel is gone', { requestId: 'req_0042' }));
    const summary = await runStubbedHarvest(env, 'stops-target-only', stub.activities, { harvest: twoChannels('stops-target-only', 1) });
    expect(summary.targets[0]).toMatchObject({ status: 'failed', error: { type: 'NotFound', message: 'the channel is gone', requestId: 'req_0042' } });
    expect(summary.targets[1]).toMatchObject({ status: 'done', items: 100 });
    expect(summary.status).toBe('completed_with_errors');
    // No stop: the run's reason is left to its targets' errors.
    expect(summary.reason).toBeUndefined();
  }, 60_000);

  it('when every target failed, the run failed', async () => {
    const stub = stubs(failing('NotFound', 'the channel is gone'), failing('NotFound', 'this one too'));
    const summary = await runStubbedHarvest(env, 'stops-all-failed', stub.activities, { harvest: twoChannels('stops-all-failed', 1) });
    expect(summary.targets.map((target) => target.status)).toEqual(['failed', 'failed']);
    expect(summary.status).toBe('failed');
    expect(stub.finished).toEqual([{ status: 'failed', creditsSpent: 0 }]);
  }, 60_000);

  it("a 402 pauses the run and its harvest's schedule, naming the run, and starts nothing more", async () => {
    const stub = stubs(failing(INSUFFICIENT_CREDITS, 'the account has 12 credits left'));
    const summary = await runStubbedHarvest(env, 'stops-402', stub.activities, { harvest: twoChannels('stops-402', 1) });
    expect(summary).toMatchObject({ status: 'paused', reason: 'insufficient credits: the account has 12 credits left' });
    expect(summary.targets[0]).toMatchObject({ status: 'paused', error: { type: INSUFFICIENT_CREDITS } });
    expect(stub.listed).toEqual([FIRST]);
    expect(stub.paused).toEqual([{ harvest: 'stops-402', reason: 'insufficient_credits (run stops-402)' }]);
    expect(stub.finished).toEqual([{ status: 'paused', creditsSpent: 0 }]);
  }, 60_000);

  it('a spent budget across runs ends the run budget_exhausted, naming the budget, and pauses no schedule', async () => {
    const message = 'the budget research has 4 of 500000 credits left this month';
    const stub = stubs(failing(BUDGET_SPENT, message));
    const summary = await runStubbedHarvest(env, 'stops-budget', stub.activities, { harvest: twoChannels('stops-budget', 1) });
    expect(summary).toMatchObject({ status: 'budget_exhausted', reason: message });
    expect(summary.targets[0]).toMatchObject({ status: 'budget_exhausted', error: { type: BUDGET_SPENT, message } });
    expect(stub.listed).toEqual([FIRST]);
    expect(stub.paused).toEqual([]);
  }, 60_000);
});

describe('a work that stops buying and says so in its result', () => {
  /** A listing work that landed a page, then stopped: `status` and `error` as the activity returns them. */
  const stopped = (status: string, error: { type: string; message: string }) => async (input: ListingWorkInput) => ({ ...pagesBought({ ...input, grant: PAGE_CREDITS }), status, error });

  it.each([
    { status: 'paused', error: { type: INSUFFICIENT_CREDITS, message: 'the account has 0 credits left' }, run: 'paused', reason: 'insufficient credits: the account has 0 credits left', schedulePaused: 1 },
    { status: 'failed', error: { type: AUTHENTICATION_ERROR, message: 'the key was revoked' }, run: 'failed', reason: 'the API refused the key: the key was revoked', schedulePaused: 0 },
    { status: 'budget_exhausted', error: { type: BUDGET_SPENT, message: 'the budget research is spent' }, run: 'budget_exhausted', reason: 'the budget research is spent', schedulePaused: 0 },
  ])('$status ($error.type): the target keeps what it landed, and the run stops $run, saying why', async ({ status, error, run, reason, schedulePaused }) => {
    const stub = stubs(stopped(status, error));
    const summary = await runStubbedHarvest(env, nameFor(`said-${status}`), stub.activities, { harvest: twoChannels(nameFor(`said-${status}`), 1) });
    expect(summary.targets[0]).toMatchObject({ status, items: 50, pages: 1, credits: PAGE_CREDITS, error });
    expect(summary).toMatchObject({ status: run, reason, creditsSpent: PAGE_CREDITS });
    expect(stub.listed).toEqual([FIRST]);
    expect(stub.paused).toHaveLength(schedulePaused);
  }, 60_000);
});

describe('the first stop stands', () => {
  /** Waits (real time, 5 s at most) until the run has paused its schedule, that is, recorded the first 402; then answers `then`. */
  const afterThePause = (paused: () => unknown[], then: () => Promise<unknown>) => async () => {
    for (let waited = 0; paused().length === 0 && waited < 5_000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10));
    return then();
  };

  it('two 402s pause the schedule once, and the run says the first', async () => {
    const stub: ReturnType<typeof stubs> = stubs(failing(INSUFFICIENT_CREDITS, 'the account has 3 credits left'), afterThePause(() => stub.paused, failing(INSUFFICIENT_CREDITS, 'the account has 0 credits left')));
    const summary = await runStubbedHarvest(env, 'stops-two-402', stub.activities, { harvest: twoChannels('stops-two-402', 2) });
    expect(summary).toMatchObject({ status: 'paused', reason: 'insufficient credits: the account has 3 credits left' });
    expect(summary.targets.map((target) => target.status)).toEqual(['paused', 'paused']);
    expect(stub.paused).toHaveLength(1);
  }, 60_000);

  it('a refused key after a 402 fails its own target, and the run stays paused for the 402', async () => {
    const stub: ReturnType<typeof stubs> = stubs(failing(INSUFFICIENT_CREDITS, 'the account has 3 credits left'), afterThePause(() => stub.paused, failing(AUTHENTICATION_ERROR, 'the key was revoked')));
    const summary = await runStubbedHarvest(env, 'stops-402-then-401', stub.activities, { harvest: twoChannels('stops-402-then-401', 2) });
    expect(summary.targets[1]).toMatchObject({ status: 'failed', error: { type: AUTHENTICATION_ERROR, message: 'the key was revoked' } });
    expect(summary).toMatchObject({ status: 'paused', reason: 'insufficient credits: the account has 3 credits left' });
    expect(stub.paused).toHaveLength(1);
  }, 60_000);
});

describe('work after the listings stops the run the same way', () => {
  const tracked = (name: string) => twoChannels(name, 2, '    track: { accounts: true }\n');
  /** Observing the tracked accounts answers `answer`; the channels list whole. */
  function observing(answer: () => Promise<unknown>) {
    const stub = stubs(async (input) => pagesBought(input));
    return { ...stub, activities: { ...stub.activities, observeAccounts: answer } };
  }
  const observed = (stop: object) => async () => ({ credits: 3, lostCalls: 0, enrichment: { calls: 1, skipped: 0, failed: 0 }, unobserved: 1, stop });

  it('a tracking work that stops on an error of its own fails the run, saying what stopped, once', async () => {
    const stub = observing(observed({ status: 'failed', error: { type: 'AnswerRefused', message: 'an answer failed its schema' } }));
    const summary = await runStubbedHarvest(env, 'stops-tracking-failed', stub.activities, { harvest: tracked('stops-tracking-failed') });
    expect(summary).toMatchObject({ status: 'failed', reason: 'tracking stopped: an answer failed its schema' });
    // The listings themselves were done.
    expect(summary.targets.map((target) => target.status)).toEqual(['done', 'done']);
  }, 60_000);

  it('a tracking work that met a 402 pauses the run and its schedule; one that failed for good fails the run, saying what could not be done', async () => {
    const stub = observing(observed({ status: 'paused', error: { type: INSUFFICIENT_CREDITS, message: 'the account has 1 credit left' } }));
    const summary = await runStubbedHarvest(env, 'stops-tracking-402', stub.activities, { harvest: tracked('stops-tracking-402') });
    expect(summary).toMatchObject({ status: 'paused', reason: 'insufficient credits: the account has 1 credit left' });
    expect(stub.paused).toEqual([{ harvest: 'stops-tracking-402', reason: 'insufficient_credits (run stops-tracking-402)' }]);

    const broken = observing(failing('ResponseInvalid', 'the profile answer was cut short'));
    const failed = await runStubbedHarvest(env, 'stops-tracking-thrown', broken.activities, { harvest: tracked('stops-tracking-thrown') });
    expect(failed).toMatchObject({ status: 'failed', reason: 'tracked accounts could not be observed: the profile answer was cut short' });
  }, 60_000);
});
