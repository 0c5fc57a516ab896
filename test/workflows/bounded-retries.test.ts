/**
 * How an activity's failure is retried (activities/outages.ts), a pure unit in Temporal's mock
 * activity environment: an outage again and again within its bound, then for good; anything else
 * retryable up to five attempts; anything permanent never; a final failure of a target's work
 * carries the progress it had reached.
 */
import { describe, expect, it } from 'vitest';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { boundedRetries, withProgressAttempt, withWorkProgress } from '../../activities/outages.js';

const refused = () => Object.assign(new Error('cannot read a call journal in the catalog postgres://…: connect ECONNREFUSED'), { name: 'CatalogError', cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) });

async function failureOf(error: unknown, info: { attempt?: number; scheduledTimestampMs?: number; heartbeatDetails?: unknown }, boundMs = 60_000): Promise<unknown> {
  const activities = boundedRetries({ work: async () => Promise.reject(error) }, boundMs);
  return new MockActivityEnvironment({ attempt: 1, scheduledTimestampMs: Date.now(), ...info }).run(activities.work).catch((failure: unknown) => failure);
}

describe('boundedRetries', () => {
  it('tries an outage again within its bound, and fails it for good past it', async () => {
    const within = await failureOf(refused(), { attempt: 9 });
    expect(within).toBeInstanceOf(ApplicationFailure);
    expect(within).toMatchObject({ type: 'StoreOutage', nonRetryable: false });
    const past = await failureOf(refused(), { attempt: 9, scheduledTimestampMs: Date.now() - 120_000 });
    expect(past).toMatchObject({ type: 'OutageTooLong', nonRetryable: true });
    expect((past as Error).message).toMatch(/the catalog did not answer for 1\d\d s/);
  });

  it('tries any other retryable failure at most five times, and a permanent one never', async () => {
    expect(await failureOf(new Error('socket hang up'), { attempt: 4 })).toMatchObject({ message: 'socket hang up' });
    expect(await failureOf(new Error('socket hang up'), { attempt: 4 })).not.toBeInstanceOf(ApplicationFailure);
    expect(await failureOf(new Error('socket hang up'), { attempt: 5 })).toMatchObject({ type: 'Error', nonRetryable: true, message: 'socket hang up' });
    const refusedKey = ApplicationFailure.create({ type: 'AuthenticationError', message: 'the key was refused', nonRetryable: true });
    expect(await failureOf(refusedKey, { attempt: 1 })).toBe(refusedKey);
  });

  it('counts only the attempts since the last one that made progress', async () => {
    // A listing whose attempts each land pages, then meet a call held past its deadline: the
    // seventh attempt made progress, so it is tried again (counted over the activity's life, its
    // target failed at the fifth).
    // Its next attempt comes after the policy's first interval, as after a first failure, not after
    // the 30 s Temporal would give a seventh.
    expect(await failureOf(withProgressAttempt(new Error('no whole answer within the call\'s deadline'), () => 7), { attempt: 7 })).toMatchObject({ nonRetryable: false, nextRetryDelay: 1_000, message: 'no whole answer within the call\'s deadline' });
    // The last progress was the third attempt's, as its heartbeats said: the seventh is the fourth
    // in a row without progress, the eighth the fifth, and final.
    expect(await failureOf(new Error('socket hang up'), { attempt: 7, heartbeatDetails: { progressAttempt: 3 } })).toMatchObject({ nonRetryable: false, nextRetryDelay: 8_000 });
    expect(await failureOf(new Error('socket hang up'), { attempt: 8, heartbeatDetails: { progressAttempt: 3 } })).toMatchObject({ nonRetryable: true, message: 'socket hang up' });
    // The failure's own mark wins over an older heartbeat: this attempt made none, the fourth did.
    expect(await failureOf(withProgressAttempt(new Error('socket hang up'), () => 4), { attempt: 9, heartbeatDetails: { progressAttempt: 3 } })).toMatchObject({ nonRetryable: true });
  });

  it('gives a final failure the progress its work had reached', async () => {
    const progress = { position: { page: 4, items: 60, offset: 60, relists: 0 }, pagesLanded: 3, itemsLanded: 60, enrichment: { calls: 60, skipped: 0, failed: 0 } };
    const failure = (await failureOf(withWorkProgress(new Error('boom'), progress), { attempt: 5 })) as ApplicationFailure;
    expect(failure.details?.at(-1)).toEqual({ workProgress: { position: progress.position, pagesLanded: 3, itemsLanded: 60 } });
    // Without its own, the progress an earlier attempt heartbeated.
    const earlier = (await failureOf(ApplicationFailure.create({ type: 'OutageTooLong', message: 'down', nonRetryable: true }), { attempt: 2, heartbeatDetails: progress })) as ApplicationFailure;
    expect(earlier.details?.at(-1)).toMatchObject({ workProgress: { pagesLanded: 3 } });
  });
});
