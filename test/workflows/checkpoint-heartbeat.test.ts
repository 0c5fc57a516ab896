/**
 * A work's heartbeats go on while its durable sync waits (an object store or catalog that does not
 * answer, an outage the work waits out): a point committed while a sync hangs must not stop them,
 * or Temporal times the attempt out at its heartbeat timeout (10 s) and retries work that was only
 * waiting. Seen in CI: outages.test.ts's MinIO freeze found a `harvestTarget` attempt retried
 * during the outage. Under Temporal's mock activity environment, on a fake clock.
 */
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CheckpointHeartbeat } from '../../activities/checkpoint-heartbeat.js';
import type { LiveWork } from '../../src/harvest/progress.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('a work\'s checkpoint heartbeat', () => {
  it('keeps heartbeating its last durable point while a sync hangs and newer points are committed', async () => {
    vi.useFakeTimers();
    const environment = new MockActivityEnvironment({ attempt: 1 });
    const beats: unknown[] = [];
    environment.on('heartbeat', (details: unknown) => beats.push(details));
    const live = (point: { page: number }): LiveWork => ({ credits: 0, items: point.page, pages: point.page, enriched: 0 });
    await environment.run(async () => {
      let syncs = 0;
      // The first sync answers; the second never does (the store stopped answering).
      const makeDurable = () => (++syncs === 1 ? Promise.resolve() : new Promise<void>(() => undefined));
      const checkpoint = new CheckpointHeartbeat(() => ({ page: 0 }), live, makeDurable);
      checkpoint.commit({ page: 1 });
      await vi.advanceTimersByTimeAsync(1_100);
      expect(checkpoint.last).toEqual({ page: 1 });
      checkpoint.commit({ page: 2 }); // its sync starts, and hangs
      await vi.advanceTimersByTimeAsync(1_100);
      checkpoint.commit({ page: 3 }); // waits behind it
      const before = beats.length;
      await vi.advanceTimersByTimeAsync(12_000);
      checkpoint.stop();
      // A beat every 2 s through the 12 s, each of the last durable point.
      expect(beats.length - before).toBeGreaterThanOrEqual(5);
      expect(beats.slice(before).every((beat) => (beat as { page: number }).page === 1)).toBe(true);
    });
  });

  it('says in its heartbeats which attempt last made progress, and keeps an earlier attempt\'s until this one does', async () => {
    vi.useFakeTimers();
    const environment = new MockActivityEnvironment({ attempt: 6, heartbeatDetails: { page: 2, progressAttempt: 4 } });
    const beats: { page: number; progressAttempt: number }[] = [];
    environment.on('heartbeat', (details: unknown) => beats.push(details as { page: number; progressAttempt: number }));
    const live = (point: { page: number }): LiveWork => ({ credits: 0, items: point.page, pages: point.page, enriched: 0 });
    await environment.run(async () => {
      const checkpoint = new CheckpointHeartbeat(() => ({ page: 0 }), live, () => Promise.resolve());
      expect(checkpoint.attemptOfLastProgress).toBe(4);
      await vi.advanceTimersByTimeAsync(2_100);
      expect(beats.at(-1)).toMatchObject({ page: 2, progressAttempt: 4 });
      checkpoint.commit({ page: 3 });
      await vi.advanceTimersByTimeAsync(100);
      checkpoint.stop();
      expect(checkpoint.attemptOfLastProgress).toBe(6);
      expect(beats.at(-1)).toMatchObject({ page: 3, progressAttempt: 6 });
    });
  });
});
