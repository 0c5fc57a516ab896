import { describe, expect, it } from 'vitest';
import {
  availableCredits,
  emptyWarning,
  failFinalLoad,
  finalStatus,
  finishListing,
  grant,
  newBudget,
  progressOf,
  reserve,
  settle,
  stopRun,
  type HarvestState,
  type TargetState,
} from '../../src/harvest/run-state.js';
import { channelPlan, priceTable } from './fixtures.js';

function target(fields: Partial<TargetState> = {}): TargetState {
  return { plan: channelPlan(), status: 'pending', position: { page: 1, items: 0, offset: 0, relists: 0 }, pages: 0, items: 0, credits: 0, knownIds: [], ...fields };
}

function state(fields: Partial<HarvestState> = {}): HarvestState {
  return {
    runId: 'run-1',
    harvestName: 'h',
    startedAt: '2026-11-21T00:00:00.000Z',
    budget: newBudget(100),
    prices: priceTable(),
    targets: [],
    enrichment: { calls: 0, skipped: 0, failed: 0, unenriched: 0 },
    callsLost: 0,
    nextWork: 1,
    ...fields,
  };
}

describe('a run\'s budget', () => {
  it('holds a reservation until it is settled with what was charged, the rest freed', () => {
    const budget = newBudget(100);
    const held = reserve(budget, 30);
    expect(budget).toEqual({ limit: 100, spent: 0, reserved: 30 });
    expect(availableCredits(budget)).toBe(70);
    settle(budget, held, 12);
    expect(budget).toEqual({ limit: 100, spent: 12, reserved: 0 });
    expect(availableCredits(budget)).toBe(88);
  });

  it('refuses a reservation beyond what is free, so spent and reserved never pass the limit', () => {
    const budget = newBudget(100);
    reserve(budget, 60);
    expect(() => reserve(budget, 41)).toThrow('cannot reserve 41 credits: only 40 of 100 are free');
    reserve(budget, 40);
    expect(availableCredits(budget)).toBe(0);
  });

  it('has nothing free, not less than nothing, after a charge above its reservation', () => {
    const budget = newBudget(10);
    settle(budget, reserve(budget, 10), 15);
    expect(availableCredits(budget)).toBe(0);
  });

  it('grants a piece of work its worst case, or all that is free when less is', () => {
    expect(grant(100, 30)).toBe(30);
    expect(grant(20, 30)).toBe(20);
    expect(grant(0, 30)).toBe(0);
    expect(grant(20, -5)).toBe(0);
  });
});

describe('a target whose listing is complete', () => {
  it('is done, or empty when it found no item', () => {
    const listed = target();
    finishListing(listed);
    expect(listed).toMatchObject({ status: 'done', listed: true });
    const empty = target({ status: 'empty' });
    finishListing(empty);
    expect(empty.status).toBe('empty');
  });

  it('is failed while enrichment calls of its items failed for good, saying how many', () => {
    const one = target({ failedCalls: 1 });
    finishListing(one);
    expect(one).toMatchObject({ status: 'failed', listed: true, error: { type: 'EnrichmentFailed' } });
    expect(one.error?.message).toMatch(/^1 enrichment call of its items failed for good/);
    const three = target({ failedCalls: 3 });
    finishListing(three, true);
    expect(three.error?.message).toMatch(/^3 enrichment calls of its items/);
  });

  it('warns, when empty, what to check for its kind', () => {
    expect(emptyWarning(channelPlan())).toBe('the API listed no items for it: check the handle (cook) and the content kind');
    expect(emptyWarning(channelPlan({ kind: 'search', params: { query: 'bread' } }))).toContain('check the query (bread)');
    expect(emptyWarning(channelPlan({ kind: 'comments', params: { url: 'https://x/1' } }))).toContain('check the URL (https://x/1)');
  });
});

describe('a run\'s stop', () => {
  it('is set once: the first reason stands, and only the call that stopped the run says it did', () => {
    const run = state();
    expect(stopRun(run, 'paused', 'insufficient credits: 402')).toBe(true);
    expect(stopRun(run, 'failed', 'the API refused the key')).toBe(false);
    expect(run.stopped).toEqual({ status: 'paused', reason: 'insufficient credits: 402' });
  });

  it('is overridden by a failed final load, which says what stopped the run before it, unless that was the same refusal', () => {
    const run = state();
    stopRun(run, 'paused', 'insufficient credits: 402');
    failFinalLoad(run, 'disk full', false);
    expect(run.stopped).toEqual({ status: 'failed', reason: 'the final load failed: disk full; before it: insufficient credits: 402' });
    const refused = state({ stopped: { status: 'failed', reason: 'a worker that keeps its data elsewhere took the run\'s task: …' } });
    failFinalLoad(refused, 'a worker that keeps its data elsewhere took the run\'s task: …', true);
    expect(refused.stopped?.reason).toBe('a worker that keeps its data elsewhere took the run\'s task: …');
    const clean = state();
    failFinalLoad(clean, 'disk full', false);
    expect(clean.stopped).toEqual({ status: 'failed', reason: 'the final load failed: disk full' });
  });
});

describe('a finished run\'s status', () => {
  it('is what stopped it, when something did', () => {
    expect(finalStatus(state({ stopped: { status: 'paused', reason: 'r' }, targets: [target({ status: 'done' })] }))).toBe('paused');
  });

  it('is budget_exhausted when a target ran out of budget', () => {
    expect(finalStatus(state({ targets: [target({ status: 'failed' }), target({ status: 'budget_exhausted' })] }))).toBe('budget_exhausted');
  });

  it('is failed when every target\'s listing failed, completed_with_errors when some did or an enrichment call failed', () => {
    expect(finalStatus(state({ targets: [target({ status: 'failed' }), target({ status: 'failed' })] }))).toBe('failed');
    expect(finalStatus(state({ targets: [target({ status: 'failed', listed: true }), target({ status: 'failed' })] }))).toBe('completed_with_errors');
    expect(finalStatus(state({ targets: [target({ status: 'failed' }), target({ status: 'done' })] }))).toBe('completed_with_errors');
    expect(finalStatus(state({ targets: [target({ status: 'done' })], enrichment: { calls: 3, skipped: 0, failed: 1, unenriched: 0 } }))).toBe('completed_with_errors');
  });

  it('is completed otherwise, with no target at all too', () => {
    expect(finalStatus(state({ targets: [target({ status: 'done' }), target({ status: 'empty' })] }))).toBe('completed');
    expect(finalStatus(state())).toBe('completed');
  });
});

describe('a run\'s progress', () => {
  const run = state({
    budget: { limit: 100, spent: 40, reserved: 25 },
    targets: [
      target({ status: 'done', items: 50, pages: 1, credits: 30, position: { page: 2, cursor: 'c2', items: 50, offset: 50, relists: 0 } }),
      target({ plan: channelPlan({ key: 'search:tiktok:keyword:bread', kind: 'search', params: { query: 'bread' } }), status: 'empty' }),
      target({ status: 'pending', items: 20, pages: 1, credits: 10, unenrichedPages: { from: 1, to: 1 }, error: { type: 'X', message: 'm' } }),
    ],
    enrichment: { calls: 7, skipped: 2, failed: 1, unenriched: 3 },
    callsLost: 1,
  });

  it('sums the targets\' items and pages, counts those no longer pending, and reads the budget', () => {
    expect(progressOf(run)).toMatchObject({
      runId: 'run-1',
      harvest: 'h',
      status: 'running',
      budget: 100,
      creditsSpent: 40,
      creditsReserved: 25,
      itemsLanded: 70,
      pagesLanded: 2,
      targetsDone: 2,
      enrichment: { calls: 7, skipped: 2, failed: 4, pending: 1 },
      callsLost: 1,
    });
  });

  it('shows each target\'s cursor, warning, error and pending enrichment where it has them', () => {
    const [done, empty, pending] = progressOf(run).targets;
    expect(done).toEqual({ key: 'channel:tiktok:cook:videos', status: 'done', items: 50, pages: 1, credits: 30, wanted: 100, cursor: 'c2' });
    expect(empty?.warning).toContain('check the query (bread)');
    expect(pending).toMatchObject({ error: { type: 'X', message: 'm' }, enrichmentPending: true });
  });

  it('takes its status from the caller, else from what stopped it, and says why it stopped', () => {
    expect(progressOf(run, 'completed').status).toBe('completed');
    expect(progressOf({ ...run, stopped: { status: 'failed', reason: 'the key was refused' } })).toMatchObject({ status: 'failed', reason: 'the key was refused' });
  });

  it('counts tracked items due and observed only when the run tracks items', () => {
    expect(progressOf(run).trackedItems).toBeUndefined();
    const tracking = { asOfMs: 0, due: { 'channel:tiktok:cook:videos': 4, 'search:tiktok:keyword:bread': 2 }, credits: 6 };
    expect(progressOf({ ...run, tracking, itemsObserved: 5 }).trackedItems).toEqual({ due: 6, observed: 5 });
  });
});
