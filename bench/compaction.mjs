#!/usr/bin/env node
/**
 * Compaction at full size (issue 41: the long checks are benchmarks; issue 44's case):
 * test/warehouse/compaction.test.ts with its local case at 100 MERGE loads of 25 new items each and
 * its shared-storage case (PostgreSQL, MinIO) at 20 loads, where the suite runs smokes of 25 loads
 * of 100 (the same 2,550 items, every assertion) and 10 loads. Prints the figures the test writes
 * (loads, the items' files before and after maintenance, how long the local loads and maintenance
 * took) and exits with vitest's status, so a run that breaks the check fails the benchmark.
 *
 *   npm run bench:compaction                              (builds first; 100 and 20 loads)
 *   COMPACTION_LOADS=50 COMPACTION_SHARED_LOADS=30 node bench/compaction.mjs
 *
 * It runs the test file through vitest with COMPACTION_REPORT naming the file the test appends its
 * figures to, one JSON line a case.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const loads = process.env.COMPACTION_LOADS ?? '100';
const sharedLoads = process.env.COMPACTION_SHARED_LOADS ?? '20';
const folder = mkdtempSync(join(tmpdir(), 'compaction-bench-'));
const report = join(folder, 'report.jsonl');
const started = Date.now();
const vitest = spawnSync('npx', ['vitest', 'run', 'test/warehouse/compaction.test.ts'], {
  cwd: new URL('..', import.meta.url).pathname,
  env: { ...process.env, COMPACTION_LOADS: loads, COMPACTION_SHARED_LOADS: sharedLoads, COMPACTION_REPORT: report },
  stdio: ['ignore', 'inherit', 'inherit'],
});
const seconds = ((Date.now() - started) / 1000).toFixed(0);
if (!existsSync(report)) {
  console.error(`compaction: no figures written (vitest exited ${vitest.status} after ${seconds} s); is dist/ built?`);
  process.exit(1);
}
const lines = readFileSync(report, 'utf8').trim().split('\n').map((line) => JSON.parse(line));
rmSync(folder, { recursive: true, force: true });
const local = lines.find((figures) => !figures.shared);
const shared = lines.find((figures) => figures.shared);
const localLine = local
  ? `local: ${local.loads} MERGE loads of ${local.newPerLoad} new items (${local.items} items), loads ${local.loadSeconds} s, items' files ${local.itemsFilesBefore} before maintenance and ${local.itemsFilesAfter} after, maintenance ${local.maintenanceSeconds} s (twice)`
  : 'local: no figures';
const sharedLine = shared ? `shared storage: ${shared.loads} loads, items' files ${shared.itemsFilesBefore} before and ${shared.itemsFilesAfter} after` : 'shared storage: no figures';
console.log(`compaction in ${seconds} s: ${localLine}; ${sharedLine}; vitest exited ${vitest.status}`);
process.exit(vitest.status ?? 1);
