#!/usr/bin/env node
/**
 * The plan-versus-run property at full size (issue 41: the long checks are benchmarks): 200 random
 * harvests of test/workflows/plan-vs-run.test.ts, each planned (`harvester plan`'s arithmetic) and
 * run on a real worker against the emulator, where the suite runs a smoke of 20 of the same seed.
 * Prints the tally the test writes (how many harvests, how many spent other than forecast, their
 * statuses) and exits with vitest's status, so a run that breaks the property fails the benchmark.
 *
 *   npm run bench:plan                                   (builds first; 200 harvests, the suite's seed)
 *   PLAN_PROPERTY_HARVESTS=400 PLAN_PROPERTY_SEED=7 node bench/plan-vs-run.mjs
 *
 * It runs the test file through vitest (its global setup starts the Temporal dev server), only its
 * property test, with PLAN_PROPERTY_REPORT naming the file the test appends its tally to.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const harvests = process.env.PLAN_PROPERTY_HARVESTS ?? '200';
const folder = mkdtempSync(join(tmpdir(), 'plan-vs-run-'));
const report = join(folder, 'report.jsonl');
const started = Date.now();
const vitest = spawnSync('npx', ['vitest', 'run', 'test/workflows/plan-vs-run.test.ts', '-t', 'random harvests'], {
  cwd: new URL('..', import.meta.url).pathname,
  env: { ...process.env, PLAN_PROPERTY_HARVESTS: harvests, PLAN_PROPERTY_REPORT: report },
  stdio: ['ignore', 'inherit', 'inherit'],
});
const seconds = ((Date.now() - started) / 1000).toFixed(0);
if (!existsSync(report)) {
  console.error(`plan-vs-run: no tally written (vitest exited ${vitest.status} after ${seconds} s); is dist/ built?`);
  process.exit(1);
}
const tally = JSON.parse(readFileSync(report, 'utf8').trim().split('\n').at(-1));
rmSync(folder, { recursive: true, force: true });
const statuses = Object.entries(tally.statuses).map(([status, count]) => `${count} ${status}`).join(', ');
console.log(
  `plan-vs-run: ${tally.harvests} harvests (seed ${tally.seed}) in ${seconds} s: ${tally.wrong} spent or landed other than forecast; ` +
    `${tally.apiHoldsAll} where the API holds all that is asked, ${tally.ample} with ample budgets; ${statuses}; ${tally.credits} credits, ${tally.items} items; vitest exited ${vitest.status}`,
);
process.exit(vitest.status ?? 1);
