/**
 * `harvester run`'s live progress: credits the work in flight was charged show while it runs (the
 * workflow counts them only when the work settles), and an ETA that waits for a basis and then
 * moves smoothly. A real run on the emulator (slowed, so the work is in flight for seconds), real
 * Temporal; the ETA's arithmetic on its own.
 */
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SocialApiClient } from '../../src/api/client.js';
import { EtaEstimator, watchProgress } from '../../src/cli/run-progress.js';
import type { HarvestInput, HarvestSummary } from '../../workflows/harvest.js';
import { startHarvestRig, type HarvestRig } from '../support/harvest-rig.js';
import { harvestFrom, startTestWorker } from '../support/temporal.js';

describe('the ETA', () => {
  it('is not shown until the progress gives it a basis', () => {
    const eta = new EtaEstimator();
    // Nothing done yet, then a first burst after one second: no basis for a rate.
    expect(eta.update(0, 1000)).toBeUndefined();
    expect(eta.update(1_000, 1000)).toBeUndefined();
    expect(eta.update(2_000, 900)).toBeUndefined();
    expect(eta.update(4_000, 900)).toBeUndefined();
    expect(eta.update(5_000, 800)).toBeGreaterThan(0);
  });

  it('does not jump when progress comes in bursts and slows down: it moves by a tenth at most, and ends near the truth', () => {
    // 1,000 units: the first 400 (listing) fast, in bursts every 8 s as heartbeats arrive, then
    // the rest (enrichment) at a third of the speed; one reading a second, as `run` reads.
    const eta = new EtaEstimator();
    const remainingAt = (second: number): number => {
      const burst = Math.floor(second / 8) * 8;
      const done = burst <= 40 ? burst * 10 : 400 + (burst - 40) * (10 / 3);
      return Math.max(0, 1000 - Math.round(done));
    };
    const end = 40 + 180; // 400 units at 10 a second, 600 at 10/3 a second
    let previous: number | undefined;
    const shown: [number, number][] = [];
    for (let second = 0; second < end; second++) {
      const value = eta.update(second * 1000, remainingAt(second));
      if (value === undefined || remainingAt(second) === 0) continue;
      if (previous !== undefined) {
        // Each second it counts down by one, and moves by at most 10 % (or 2 s) besides.
        expect(Math.abs(value - (previous - 1)), `at ${second} s`).toBeLessThanOrEqual(Math.max(2, (previous - 1) * 0.1) + 1e-9);
      }
      previous = value;
      shown.push([second, value]);
    }
    expect(shown[0]![0]).toBeGreaterThanOrEqual(5);
    // Once it has seen the slow part for a while, it is within a quarter of the time left.
    for (const [second, value] of shown.filter(([second]) => second >= 120 && second < end - 30)) {
      const truth = end - second;
      expect(Math.abs(value - truth) / truth, `at ${second} s: ${value} against ${truth}`).toBeLessThan(0.25);
    }
  });

  it('through a stall it moves by a tenth at most, and says nothing once the window holds no progress and the count ran out', () => {
    const eta = new EtaEstimator();
    for (let second = 0; second <= 10; second++) eta.update(second * 1000, 100 - second * 5);
    const before = eta.update(11_000, 45)!;
    expect(before).toBeGreaterThan(0);
    // No progress any more: the rate over the window falls, and the ETA grows, a tenth at most at
    // a time; once the window holds no progress it counts down, then gives up.
    let last = before;
    let second = 12;
    for (; second < 200; second++) {
      const value = eta.update(second * 1000, 45);
      if (value === undefined) break;
      expect(value, `at ${second} s`).toBeLessThanOrEqual(Math.max(last - 1 + 2, (last - 1) * 1.1) + 1e-9);
      if (second > 11 + 30) expect(value, `at ${second} s`).toBeLessThan(last);
      last = value;
    }
    expect(second).toBeLessThan(200);
  });
});

describe('live progress of a run', () => {
  let rig: HarvestRig;
  let api: SocialApiClient;
  beforeAll(async () => {
    // Every answer 100 ms late, and one enrichment call at a time: the run's one piece of work is
    // in flight for several seconds.
    rig = await startHarvestRig({ harvest: 'sk_live_progress', verify: 'sk_live_progress_verify' }, { latencyMs: 100 });
    api = rig.api;
  });
  afterAll(async () => {
    await rig.close();
  });

  it('shows the credits the work in flight was charged, before the workflow counts them', async () => {
    const worker = await startTestWorker(api);
    try {
      const harvest = harvestFrom(`
harvests:
  - name: watched
    budget: { credits: 10000 }
    channels:
      - { platform: tiktok, handle: ${rig.catalog.tiktok.handles[9]}, content: videos, max_items: 100 }
    enrich: { stats: true }
`);
      const handle = await rig.temporal.workflow.start('harvestWorkflow', {
        taskQueue: worker.taskQueue,
        workflowId: `watched-${Date.now()}`,
        args: [{ harvest, concurrency: { calls: 1 } } satisfies HarvestInput],
      });
      const stream = new PassThrough();
      let output = '';
      stream.on('data', (chunk: Buffer) => (output += chunk.toString()));
      const watching = watchProgress(handle, stream);
      let summary: HarvestSummary;
      try {
        summary = (await handle.result()) as HarvestSummary;
      } finally {
        await watching.stop();
      }
      expect(summary.status).toBe('completed');
      const lines = output.trim().split('\n');
      const whileListing = lines.filter((line) => line.startsWith('running: targets 0/1,'));
      expect(whileListing.length).toBeGreaterThan(2);
      // The workflow's own count is 0 until the target's one work settles: these are live.
      const credits = whileListing.map((line) => Number(/credits (\d+)\/10000/.exec(line)![1]));
      expect(Math.max(...credits)).toBeGreaterThan(0);
      expect(Math.max(...credits)).toBeLessThan(summary.creditsSpent);
      // Live, and never more than what the run was charged in the end.
      expect(credits.every((value, index) => index === 0 || value >= credits[index - 1]!)).toBe(true);
      // No ETA before there is a basis for one.
      expect(lines[0]).toMatch(/ETA …$/);
    } finally {
      await worker.stop();
    }
  }, 60_000);
});
