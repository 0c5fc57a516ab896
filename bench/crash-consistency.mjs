#!/usr/bin/env node
/**
 * The crash-consistency sweep (issue 38): every crash point of test/crash/crash-consistency.test.ts
 * (the suite runs three of the six: listing-pages, job-results, after-run-end), each a small harvest
 * recorded under strace, crashed, its data directory made what the disk keeps after a power loss
 * there, then checked. Prints, per point, where it crashed, what the disk dropped, and what the
 * checks found, for bench/RESULTS.md.
 *
 *   npm run bench:crash                                (builds first; all six)
 *   node bench/crash-consistency.mjs [point,point…]    (npm run build first; all six by default)
 *
 * It runs the test file through vitest (its global setup starts the Temporal dev server) with
 * CRASH_POINTS and CRASH_REPORT set, and reads the report the test appends, one JSON line a point.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const points = process.argv[2] ?? 'all';
const report = join(mkdtempSync(join(tmpdir(), 'crash-sweep-')), 'report.jsonl');
const started = Date.now();
const vitest = spawnSync('npx', ['vitest', 'run', 'test/crash/crash-consistency.test.ts'], {
  env: { ...process.env, CRASH_POINTS: points, CRASH_REPORT: report },
  stdio: ['ignore', 'ignore', 'inherit'],
});
if (!existsSync(report)) {
  console.error(`no crash point reported (vitest exited ${vitest.status}); is dist/ built?`);
  process.exit(1);
}

const kinds = (dropped) => {
  const counts = new Map();
  for (const { what } of dropped) counts.set(what, (counts.get(what) ?? 0) + 1);
  return [...counts].map(([what, n]) => `${n} ${what}`).join(', ') || 'nothing';
};
const place = (path) => path.replace(/ducklake-[0-9a-f-]+\.parquet/, 'ducklake-….parquet').replace(/[a-z0-9-]+-\d{13}/, '<run>');

for (const line of readFileSync(report, 'utf8').trim().split('\n')) {
  const point = JSON.parse(line);
  const { dropped, keptAsWritten, foldersNeverSynced } = point.reconstruction;
  console.log(`\n## ${point.point}: ${point.failures.length ? `FAILS (${point.failures.length})` : 'passes'}`);
  console.log(`crashed at: ${point.trigger}; record: ${point.recorded.calls} calls on the data directory, ${point.recorded.syncs} syncs`);
  console.log(`lake at the kill: ${typeof point.lakeAtKill === 'string' ? point.lakeAtKill : Object.entries(point.lakeAtKill).filter(([, n]) => n > 0).map(([t, n]) => `${t} ${n}`).join(', ')}`);
  console.log(`dropped: ${kinds(dropped)}`);
  for (const file of dropped) console.log(`  ${file.what.padEnd(12)} ${place(file.path)}${file.sizeAtKill === undefined ? '' : ` (${file.sizeAtKill} → ${file.sizeKept} bytes)`}`);
  if (keptAsWritten.length) console.log(`database files kept as written (writes after their last sync): ${keptAsWritten.join(', ')}`);
  console.log(`folders made whose parent was never fsynced (kept): ${foldersNeverSynced.map(place).join(', ') || 'none'}`);
  if (point.paidNotInLake) console.log(`paid, not in the lake after the run (landed unsynced and lost with the power, or in flight; bought again): ${point.paidNotInLake.calls} calls, ${point.paidNotInLake.credits} credits`);
  for (const failure of point.failures) console.log(`  FAILED: ${failure}`);
}
console.log(`\n${points} in ${((Date.now() - started) / 1000).toFixed(0)} s; vitest exited ${vitest.status}`);
