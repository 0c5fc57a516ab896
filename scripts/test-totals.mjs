#!/usr/bin/env node
/**
 * Prints `N passed, N failed` from vitest's JSON reports, for CI: the suite's (`npm test`) and the
 * long tier's (`npm run test:long`), which runs the tests the suite's run left out by their tag. A
 * test counts once, by what it did where it ran: skipped only if no report ran it. A missing report
 * means the run stopped before the tests (setup, build, typecheck or lint failed): that counts as
 * one failure.
 */
import { existsSync, readFileSync } from 'node:fs';

const files = process.argv.length > 2 ? process.argv.slice(2) : ['test-results/vitest.json'];
let failed = 0;
/** Each test by file and full name: 'passed', 'failed', or 'skipped' (pending, todo). */
const outcomes = new Map();
for (const file of files) {
  if (!existsSync(file)) {
    failed += 1;
    continue;
  }
  const report = JSON.parse(readFileSync(file, 'utf8'));
  for (const suite of report.testResults ?? []) {
    // A suite that failed to load counts as a failure: its tests never ran.
    if (suite.status === 'failed' && suite.assertionResults.length === 0) failed += 1;
    for (const test of suite.assertionResults) {
      const key = `${suite.name}\u0000${test.fullName}`;
      const outcome = test.status === 'passed' ? 'passed' : test.status === 'failed' ? 'failed' : 'skipped';
      const before = outcomes.get(key);
      if (before === undefined || before === 'skipped') outcomes.set(key, outcome);
      else if (outcome === 'failed') outcomes.set(key, 'failed');
    }
  }
}
const count = (outcome) => [...outcomes.values()].filter((value) => value === outcome).length;
const passed = count('passed');
failed += count('failed');
const skipped = count('skipped');
process.stdout.write(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
