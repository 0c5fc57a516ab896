/**
 * A plan from the lake's history: a harvest (channels with comments, searches, tracked accounts
 * and items) is run once; six hours later on the API's clock `harvester plan` plans it again from
 * what the lake observed, and the second run spends what that plan expected, within 10%; so does
 * the run's own forecast, and its summary names each part that spent outside its range. The plan
 * from the price table alone (`--no-history`, the plan before history) misses the same run by far
 * more: it forecasts a first run, every list to max_items with max_per_item comments on each item.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { CostPlan } from '../../src/harvest/cost-plan.js';
import { linesOf } from '../../src/harvest/cost-plan.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { summaryText } from '../../src/cli/commands/run.js';
import { runCli } from '../support/cli.js';
import { startHarvestRig, type HarvestRig } from '../support/harvest-rig.js';
import { executeHarvest, harvestFrom, startTestWorker } from '../support/temporal.js';

const HARVEST_KEY = 'sk_live_plan_history';
const VERIFY_KEY = 'sk_live_plan_history_verify';
const SIX_HOURS_S = 6 * 3600;

let rig: HarvestRig;
beforeAll(async () => {
  rig = await startHarvestRig({ harvest: HARVEST_KEY, verify: VERIFY_KEY }, { credits: 100_000_000 });
});
afterAll(async () => {
  await rig?.close();
});

function configOf(): string {
  const { tiktok, instagram } = rig.catalog;
  return `harvests:
  - name: from-history
    budget: { credits: 100000 }
    enrich: { stats: true, comments: { max_per_item: 5 } }
    track: { accounts: true, items: { days: 7 } }
    channels:
      - { platform: tiktok, handle: ${tiktok.handles[0]}, content: videos, max_items: 30 }
      - { platform: instagram, handle: ${instagram.handles[0]}, content: reels, max_items: 30 }
    searches:
      - { platform: tiktok, query: "${tiktok.queries[0]}", max_results: 100 }
      - { platform: instagram, query: "${instagram.queries[0]}", max_results: 100 }
`;
}

async function plan(configFile: string, dataDir: string, atMs: number, ...args: string[]): Promise<CostPlan> {
  const result = await runCli(['plan', 'from-history', '--config', configFile, '--json', '--at', new Date(atMs).toISOString(), ...args], { HARVESTER_DATA_DIR: dataDir });
  expect(result.stderr).toBe('');
  return JSON.parse(result.stdout) as CostPlan;
}

it("a harvest planned again from the lake's history spends what the plan expected, within 10%, and the plan names what it used", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'plan-history-'));
  const configFile = join(dir, 'harvests.yaml');
  writeFileSync(configFile, configOf());
  const harvest = harvestFrom(configOf());
  const worker = await startTestWorker(rig.api);
  try {
    // A day into the emulated world: its items before its start are laid out at once, at posting
    // times of a coarse grid; a day on, the newest items are those posted at each account's pace.
    await rig.emulator.admin('clock', { advance_seconds: 24 * 3600 });
    const first = await executeHarvest(rig.temporal, { taskQueue: worker.taskQueue, workflowId: `plan-history-1-${Date.now()}`, input: { harvest } });
    expect(first.status).toBe('completed');
    await rig.emulator.admin('clock', { advance_seconds: SIX_HOURS_S });
    const at = (await rig.api.serverTime()).getTime();
    const fromHistory = await plan(configFile, worker.dataDir, at);
    const fromPrices = await plan(configFile, worker.dataDir, at, '--no-history');
    const text = (await runCli(['plan', 'from-history', '--config', configFile, '--at', new Date(at).toISOString()], { HARVESTER_DATA_DIR: worker.dataDir })).stdout;
    // Two plans of the same lake at the same --at are the same plan, to the digit (they once
    // differed by 2%: the comments observations came in the lake's row order, src/harvest/plan-history.ts).
    expect(text).toContain(`expected:   ${fromHistory.totals.expectedCredits} credits (range ${fromHistory.totals.expectedRange.low} to ${fromHistory.totals.expectedRange.high})`);
    expect(text).toContain("expected from the lake's history (planned at ");
    expect(text).toMatch(/- search:tiktok:keyword:[^,]+, \+ comments: [\d.]+ comments per item, from \d+ items' comments bought, read at the ages the new items are expected to have \(\d+ observations; \d+ to \d+ credits\)/);
    const ledgerBefore = (await rig.emulator.ledger(HARVEST_KEY)).length;
    const second = await executeHarvest(rig.temporal, { taskQueue: worker.taskQueue, workflowId: `plan-history-2-${Date.now()}`, input: { harvest } });
    expect(second.status).toBe('completed');
    const charged = (await rig.emulator.ledger(HARVEST_KEY)).slice(ledgerBefore).reduce((sum, entry) => sum + entry.credits, 0);
    expect(second.creditsSpent).toBe(charged);

    const miss = (planned: CostPlan) => Math.abs(planned.totals.expectedCredits - charged) / charged;
    const report = `spent ${charged}; from history ${fromHistory.totals.expectedCredits} (range ${fromHistory.totals.expectedRange.low} to ${fromHistory.totals.expectedRange.high}), from prices ${fromPrices.totals.expectedCredits}`;
    expect(miss(fromHistory), report).toBeLessThanOrEqual(0.1);
    expect(miss(fromPrices), report).toBeGreaterThan(0.1);
    expect(fromHistory.totals.expectedRange.low).toBeLessThanOrEqual(charged);
    expect(fromHistory.totals.expectedRange.high).toBeGreaterThanOrEqual(charged);
    // The worst case is still a bound the run does not pass.
    expect(charged).toBeLessThanOrEqual(fromHistory.totals.worstCreditsCapped);

    // Each listing and each comments line says it came from history, and from how many observations.
    for (const target of fromHistory.targets) {
      expect(target.list.basis, target.key).toMatchObject({ source: 'history' });
      expect(target.list.basis.observations, target.key).toBeGreaterThanOrEqual(2);
      const comments = target.enrichment.find((line) => line.what === 'comments')!;
      expect(comments.basis, target.key).toMatchObject({ source: 'history' });
      const bought = (
        await queryWarehouse(worker.dataDir, `SELECT count(DISTINCT target) AS n FROM api_calls WHERE run_id = '${first.runId}' AND endpoint LIKE '%/comments'`)
      ).rows[0] as { n: number | bigint };
      expect(comments.basis.observations).toBeLessThanOrEqual(Number(bought.n));
      for (const line of linesOf(target)) expect(line.range.low <= line.expected.credits && line.expected.credits <= line.range.high, `${target.key} ${line.what}`).toBe(true);
    }
    // The run's own forecast, made as it started from the same history, and its parts outside their range named in its summary.
    const forecast = second.forecast!;
    expect(forecast.fromHistory).toBeGreaterThan(0);
    expect(forecast.spent).toBe(charged);
    expect(Math.abs(forecast.expectedCredits - charged) / charged, `run's forecast ${forecast.expectedCredits}, spent ${charged}`).toBeLessThanOrEqual(0.1);
    const spentByPart = Object.fromEntries(second.targets.map((target) => [target.key, target.credits]));
    for (const part of forecast.parts.filter((candidate) => candidate.part in spentByPart)) {
      const spent = spentByPart[part.part]!;
      const outside = spent > part.high || spent < part.low;
      expect(forecast.misses.some((miss) => miss.part === part.part && miss.spent === spent), `${part.part}: spent ${spent}, range ${part.low} to ${part.high}`).toBe(outside);
    }
    expect(summaryText(second, 0)).toContain(`forecast: ${forecast.expectedCredits} credits (range ${forecast.low} to ${forecast.high}; ${forecast.fromHistory} lines from the lake's history`);
    expect(fromPrices.targets.every((target) => linesOf(target).every((line) => line.basis.source === 'prices' || line.what === 'tracked'))).toBe(true);
  } finally {
    await worker.stop();
  }
}, 10 * 60_000);
