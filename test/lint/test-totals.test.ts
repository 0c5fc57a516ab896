/**
 * scripts/test-totals.mjs, CI's last line: the suite's report and the long tier's, each test counted
 * once by what it did where it ran (a test the suite left to the long tier is skipped there and
 * passed or failed here), a missing report a failure.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/project-paths.js';

const SCRIPT = join(PROJECT_ROOT, 'scripts', 'test-totals.mjs');

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

type Status = 'passed' | 'failed' | 'pending';

/** A vitest JSON report of one file's tests, by full name and status. */
function report(name: string, tests: Record<string, Status>): string {
  dir ??= mkdtempSync(join(tmpdir(), 'test-totals-'));
  const path = join(dir, `${name}.json`);
  const assertionResults = Object.entries(tests).map(([fullName, status]) => ({ fullName, status }));
  writeFileSync(path, JSON.stringify({ testResults: [{ name: '/repo/test/a.test.ts', status: 'passed', assertionResults }] }));
  return path;
}

/** The script's line and exit code for these reports. */
async function totals(...files: string[]): Promise<{ line: string; code: number }> {
  try {
    const { stdout } = await promisify(execFile)(process.execPath, [SCRIPT, ...files]);
    return { line: stdout.trim(), code: 0 };
  } catch (error) {
    const failed = error as { stdout: string; code: number };
    return { line: failed.stdout.trim(), code: failed.code };
  }
}

it('counts a test the suite left to the long tier once, as it did there', async () => {
  const suite = report('suite', { short: 'passed', long: 'pending' });
  const long = report('long', { short: 'pending', long: 'passed' });
  expect(await totals(suite, long)).toEqual({ line: '2 passed, 0 failed', code: 0 });
});

it('a failure in either report fails the totals', async () => {
  const suite = report('suite', { short: 'passed', long: 'pending' });
  const long = report('long', { short: 'pending', long: 'failed' });
  expect(await totals(suite, long)).toEqual({ line: '1 passed, 1 failed', code: 1 });
});

it('a report that is missing (its run stopped before its tests) counts as a failure; a test no report ran is skipped', async () => {
  const suite = report('suite', { short: 'passed', other: 'pending' });
  expect(await totals(suite, join(dir!, 'absent.json'))).toEqual({ line: '1 passed, 1 failed, 1 skipped', code: 1 });
});
