/**
 * scripts/python-target.mjs, which setup runs on the tests' Python target: on a small target made
 * here (real files, no pip), it removes only what it names, keeps dbt's runtime macros that live
 * in folders named `tests`, makes identical files of two targets one file, and does it once.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
// @ts-expect-error -- a plain .mjs script of setup, without types
import { slimTarget, stripPrograms } from '../../scripts/python-target.mjs';

const slim = slimTarget as (target: string, options: { unused: string[]; sharedWith: string }) => number;
const strip = stripPrograms as (target: string, programs: string[]) => number;

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
  for (const file of ['root.dat', 'en.dat', 'en_US.dat', 'en_US_POSIX.dat', 'de.dat', 'de_DE.dat', 'zh_Hant.dat']) write(join(target, 'babel', 'locale-data', file), file);
  write(join(target, 'babel', 'locale-data', 'LICENSE.unicode'), 'license');
  write(join(target, 'babel', 'global.dat'), 'global');
  write(join(target, 'pyarrow', 'include', 'arrow', 'api.h'), '#pragma once');
  write(join(target, 'pyarrow', 'src', 'arrow', 'python', 'common.cc'), '// glue');
  write(join(target, 'pyarrow', 'includes', 'libarrow.pxd'), 'cdef extern');
  write(join(target, 'pyarrow', 'lib.pxd'), 'cdef class');
  write(join(target, 'pyarrow', 'table.pxi'), 'cdef class Table');
  write(join(target, 'pyarrow', '_compute.pyx'), 'def call_function(): ...');
  write(join(target, 'pyarrow', 'libarrow_python.so'), 'glue');
  write(join(target, 'pyarrow', 'libarrow_python.so.2600.1.0'), 'glue');
  write(join(target, 'pyarrow', 'libarrow_python.so.2600'), 'glue');
  write(join(target, 'pyarrow', 'libarrow_python_parquet_encryption.so'), 'encryption');
  write(join(target, 'pyarrow', 'libarrow_python_parquet_encryption.so.2600'), 'encryption');
  // A small file both targets hold at one path (a package both install), and one only its size shares.
  write(join(analysts, 'pytz', 'zoneinfo', 'UTC'), 'TZif2 UTC');
  write(join(target, 'pytz', 'zoneinfo', 'UTC'), 'TZif2 UTC');
  write(join(analysts, 'pytz', 'zoneinfo', 'GMT'), 'TZif2 GMT');
  write(join(target, 'pytz', 'zoneinfo', 'GMT'), 'TZif2 gmt');
  for (const dir of [target, analysts]) write(join(dir, 'STRIPPED'), 'a marker setup rewrites in place');

  expect(slim(target, { unused: [join('bin', 'dbt-core-experimental-parser')], sharedWith: analysts })).toBeGreaterThan(0);

  const gone = ['pandas/tests', 'pandas/core/__pycache__', 'pyarrow/libarrow_flight.so.2600', 'bin/dbt-core-experimental-parser'];
  gone.push(...['de.dat', 'de_DE.dat', 'zh_Hant.dat'].map((file) => `babel/locale-data/${file}`));
  gone.push('pyarrow/include', 'pyarrow/src', 'pyarrow/includes', 'pyarrow/lib.pxd', 'pyarrow/table.pxi', 'pyarrow/_compute.pyx');
  gone.push('pyarrow/libarrow_python.so', 'pyarrow/libarrow_python.so.2600.1.0', 'pyarrow/libarrow_python_parquet_encryption.so');
  for (const path of gone) expect(existsSync(join(target, path)), path).toBe(false);
  const kept = ['pandas/core/frame.py', 'pyarrow/flight.py', 'pyarrow/libarrow.so.2600', 'dbt/include/global_project/macros/materializations/tests/test.sql'];
  kept.push(...['root.dat', 'en.dat', 'en_US.dat', 'en_US_POSIX.dat', 'LICENSE.unicode'].map((file) => `babel/locale-data/${file}`), 'babel/global.dat');
  // The SONAMEs the modules load their glue libraries by.
  kept.push('pyarrow/libarrow_python.so.2600', 'pyarrow/libarrow_python_parquet_encryption.so.2600');
  for (const path of kept) expect(existsSync(join(target, path)), path).toBe(true);
  expect(statSync(join(target, 'pytz', 'zoneinfo', 'UTC')).ino).toBe(statSync(join(analysts, 'pytz', 'zoneinfo', 'UTC')).ino);
  expect(statSync(join(target, 'pytz', 'zoneinfo', 'GMT')).ino).not.toBe(statSync(join(analysts, 'pytz', 'zoneinfo', 'GMT')).ino);
  expect(readFileSync(join(target, 'pytz', 'zoneinfo', 'GMT'), 'utf8')).toBe('TZif2 gmt');
  // The markers at the top stay each target's own, though their content is the same.
  expect(statSync(join(target, 'STRIPPED')).ino).not.toBe(statSync(join(analysts, 'STRIPPED')).ino);
  // One file with two names, its content whole.
  expect(statSync(join(target, '_duckdb.so')).ino).toBe(statSync(join(analysts, '_duckdb.so')).ino);
  expect(readFileSync(join(target, '_duckdb.so')).equals(duckdbLibrary)).toBe(true);
  // Once per install: a second setup finds the marker and does nothing, bytecode Python wrote since included.
  write(join(target, 'pandas', 'core', '__pycache__', 'frame.cpython-311.pyc'), 'bytecode');
  expect(slim(target, { unused: [], sharedWith: analysts })).toBe(0);
  expect(existsSync(join(target, 'pandas', 'core', '__pycache__'))).toBe(true);
});

it('strips a program of its symbol table once per install, and the program still runs', () => {
  dir = mkdtempSync(join(tmpdir(), 'python-target-'));
  const target = join(dir, 'analysts');
  write(join(target, 'REQUIREMENTS'), 'duckdb-cli==1.5.5');
  const source = join(dir, 'answer.c');
  write(source, '#include <stdio.h>\nint answer(void) { return 42; }\nint main(void) { printf("%d\\n", answer()); return 0; }\n');
  const program = join(target, 'duckdb_cli', 'duckdb');
  mkdirSync(dirname(program), { recursive: true });
  // A program with its symbol table, as the wheel ships DuckDB's CLI: built here with the C compiler.
  const built = spawnSync('cc', ['-g', '-o', program, source], { encoding: 'utf8' });
  expect(built.status, `cc, needed to build a program to strip: ${built.stderr ?? built.error}`).toBe(0);
  const before = statSync(program).size;

  expect(strip(target, [join('duckdb_cli', 'duckdb')])).toBeGreaterThan(0);

  expect(statSync(program).size).toBeLessThan(before);
  expect(spawnSync('nm', [program], { encoding: 'utf8' }).stderr).toMatch(/no symbols/);
  expect(spawnSync(program, [], { encoding: 'utf8' }).stdout).toBe('42\n');
  // A second setup finds the marker; a new install (other requirements) strips again.
  expect(strip(target, [join('duckdb_cli', 'duckdb')])).toBe(0);
  write(join(target, 'REQUIREMENTS'), 'duckdb-cli==1.5.6');
  spawnSync('cc', ['-g', '-o', program, source]);
  expect(strip(target, [join('duckdb_cli', 'duckdb')])).toBeGreaterThan(0);
});
