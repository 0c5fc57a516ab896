/**
 * The table of steps as `harvester plan` walks it (cost-plan.ts): each step forecasts out of what
 * the steps before it left free, in table order.
 */
import { describe, expect, it } from 'vitest';
import { planHarvestCost } from '../../src/harvest/cost-plan.js';
import { harvestOf, priceTable } from './fixtures.js';

describe('the table of steps', () => {
  it('forecasts each step out of what the steps before it left free', () => {
    // A job of 600 items at 1 credit, a paged channel of 10 items with stats (2 credits an item),
    // a tracked account (1 credit): a budget of 610 reserves the job, then lists 5 paged items.
    const harvest = harvestOf({
      budget: { credits: 610 },
      job_threshold: 500,
      channels: [
        { platform: 'tiktok', handle: 'big', content: 'videos', max_items: 600 },
        { platform: 'tiktok', handle: 'small', content: 'videos', max_items: 10 },
      ],
      enrich: { stats: true, comments: false, transcript: false, summary: false, download: false },
      track: { accounts: true },
    });
    const plan = planHarvestCost(harvest, priceTable());
    const [big, small] = plan.targets;
    expect(big!.list).toMatchObject({ mode: 'job', expected: { calls: 1, items: 600, credits: 600 } });
    expect(small!.list.expected.items).toBe(5);
    // Nothing is left for the job's items or the tracked accounts, which come later in the table.
    expect(big!.enrichment[0]!.expected.items).toBe(0);
    expect(big!.account?.expected.credits).toBe(0);
    expect(plan.totals.expectedCredits).toBe(610);
  });
});
