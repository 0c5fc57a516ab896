/**
 * scripts/python-target.mjs, which setup runs on the tests' Python target: on a small target made
 * here (real files, no pip), it removes only what it names, keeps dbt's runtime macros that live
 * in folders named `tests`, makes identical files of two targets one file, and does it once.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
// @ts-expect-error -- a plain .mjs script of setup, without types
import { slimTarget } from '../../scripts/python-target.mjs';

const slim = slimTarget as (target: string, options: { unused: string[]; sharedWith: string }) => number;

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function write(path: string, content: string | Buffer): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, content);
}

it('removes the named test suites, unused files and bytecode, keeps the rest, links files both targets hold, and does it once', () => {
  dir = mkdtempSync(join(tmpdir(), 'python-target-'));
  const [target, analysts] = [join(dir, 'python'), join(dir, 'analysts')];
  const duckdbLibrary = Buffer.alloc(200_000, 7);
  write(join(analysts, 'REQUIREMENTS'), 'duckdb==1.5.5');
  write(join(analysts, '_duckdb.so'), duckdbLibrary);
  write(join(target, 'REQUIREMENTS'), 'duckdb==1.5.5\npandas==2.3.3');
  write(join(target, '_duckdb.so'), duckdbLibrary);
  write(join(target, 'pandas', 'tests', 'test_frame.py'), 'x'.repeat(100_000));
  write(join(target, 'pandas', 'core', 'frame.py'), 'class DataFrame: ...');
  write(join(target, 'pandas', 'core', '__pycache__', 'frame.cpython-311.pyc'), 'bytecode');
  write(join(target, 'pyarrow', 'libarrow_flight.so.2600'), 'flight');
  write(join(target, 'pyarrow', 'flight.py'), 'from pyarrow._flight import *');
  write(join(target, 'pyarrow', 'libarrow.so.2600'), 'arrow');
  write(join(target, 'dbt', 'include', 'global_project', 'macros', 'materializations', 'tests', 'test.sql'), '{% materialization test %}');
  write(join(target, 'bin', 'dbt-core-experimental-parser'), 'parser');

  expect(slim(target, { unused: [join('bin', 'dbt-core-experimental-parser')], sharedWith: analysts })).toBeGreaterThan(0);

  for (const gone of ['pandas/tests', 'pandas/core/__pycache__', 'pyarrow/libarrow_flight.so.2600', 'bin/dbt-core-experimental-parser']) expect(existsSync(join(target, gone)), gone).toBe(false);
  for (const kept of ['pandas/core/frame.py', 'pyarrow/flight.py', 'pyarrow/libarrow.so.2600', 'dbt/include/global_project/macros/materializations/tests/test.sql']) expect(existsSync(join(target, kept)), kept).toBe(true);
  // One file with two names, its content whole.
  expect(statSync(join(target, '_duckdb.so')).ino).toBe(statSync(join(analysts, '_duckdb.so')).ino);
  expect(readFileSync(join(target, '_duckdb.so')).equals(duckdbLibrary)).toBe(true);
  // Once per install: a second setup finds the marker and does nothing, bytecode Python wrote since included.
  write(join(target, 'pandas', 'core', '__pycache__', 'frame.cpython-311.pyc'), 'bytecode');
  expect(slim(target, { unused: [], sharedWith: analysts })).toBe(0);
  expect(existsSync(join(target, 'pandas', 'core', '__pycache__'))).toBe(true);
});
