import { describe, expect, it } from 'vitest';
import { resumableState } from '../../src/harvest/checkpoint.js';
import type { HarvestState, TargetState } from '../../src/harvest/run-state.js';

function target(key: string, fields: Partial<TargetState>): TargetState {
  return {
    plan: { key, kind: 'channel', platform: 'tiktok', endpoint: 'channel-videos', params: { handle: key }, maxItems: 100, enrich: false },
    status: 'pending',
    position: { page: 1, items: 0, offset: 0, relists: 0 },
    pages: 0,
    items: 0,
    credits: 0,
    knownIds: [],
    ...fields,
  };
}

const checkpoint: HarvestState = {
  runId: 'run-1',
  harvestName: 'h',
  startedAt: '2026-11-21T00:00:00.000Z',
  budget: { limit: 1000, spent: 700, reserved: 300 },
  prices: {} as HarvestState['prices'],
  targets: [
    target('done', { status: 'done', items: 100, pages: 2, position: { page: 3, cursor: 'c1', items: 100, offset: 100, relists: 0 } }),
    target('out-of-budget', { status: 'budget_exhausted', items: 40, pages: 1, position: { page: 2, cursor: 'c2', items: 40, offset: 40, relists: 0 } }),
    target('job-in-flight', { status: 'pending', jobId: 'job_a', jobReserved: 300 }),
    target('job-failed', { status: 'failed', jobId: 'job_b', jobReserved: 0, error: { type: 'JobFailed', message: 'x' } }),
  ],
  enrichment: { calls: 0, skipped: 0, failed: 0, unenriched: 0 },
  callsLost: 0,
  nextWork: 7,
  stopped: { status: 'paused', reason: 'insufficient credits' },
};

describe('resuming a run from its checkpoint', () => {
  const resumed = resumableState(checkpoint, 500);

  it('keeps finished targets, and resumes the others from their cursors', () => {
    expect(resumed.targets.map((t) => [t.plan.key, t.status, t.position.cursor, t.items])).toEqual([
      ['done', 'done', 'c1', 100],
      ['out-of-budget', 'pending', 'c2', 40],
      ['job-in-flight', 'pending', undefined, 0],
      ['job-failed', 'pending', undefined, 0],
    ]);
    expect(resumed.targets.every((t) => t.error === undefined)).toBe(true);
    expect(resumed.stopped).toBeUndefined();
    expect(resumed.runId).toBe('run-1');
  });

  it('awaits a job still in flight with its reservation, and forgets a failed one', () => {
    expect(resumed.targets[2]).toMatchObject({ jobId: 'job_a', jobReserved: 300 });
    expect(resumed.targets[3]!.jobId).toBeUndefined();
    // Spent stays; the in-flight job's reservation is still held; the retry adds its own credits.
    expect(resumed.budget).toEqual({ limit: 700 + 300 + 500, spent: 700, reserved: 300 });
  });
});
