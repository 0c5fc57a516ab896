#!/usr/bin/env node
/**
 * Prints `N passed, N failed` from vitest's JSON report, for CI. A missing report means the run
 * stopped before the tests (setup, build, typecheck or lint failed): that counts as one failure.
 */
import { existsSync, readFileSync } from 'node:fs';

const file = process.argv[2] ?? 'test-results/vitest.json';
if (!existsSync(file)) {
  process.stdout.write('0 passed, 1 failed\n');
  process.exit(1);
}
const report = JSON.parse(readFileSync(file, 'utf8'));
const passed = report.numPassedTests ?? 0;
// Suites that failed to load count as failures too: their tests never ran.
const failed = (report.numFailedTests ?? 0) + (report.testResults ?? []).filter((suite) => suite.status === 'failed' && suite.assertionResults.length === 0).length;
const skipped = (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
process.stdout.write(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
