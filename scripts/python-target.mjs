/**
 * What scripts/setup.mjs removes from the tests' Python target after pip installed it, and how it
 * keeps one copy of a file that two targets both hold: the wheels bring their own test suites,
 * libraries no test loads, and (in .tools/analysts and .tools/python) the same DuckDB twice. Every
 * removal here is of a path named below, never a pattern over every package: dbt, for one, keeps
 * runtime macros in folders named `tests` (dbt/include/global_project/macros/materializations/tests).
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, linkSync, lstatSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

/** Packages whose bundled test suites (every folder named `tests` inside them) no one here runs: 72 MB. */
const PACKAGES_WITH_TEST_SUITES = ['pandas', 'pyarrow', 'numpy', 'networkx'];

/**
 * Files no test loads, by the start of their names (the rest names the Arrow and Python versions):
 * pyarrow's Arrow Flight (RPC; loaded only by `import pyarrow.flight`, which nothing here does; no
 * other library of pyarrow needs it), its C++ test module, and its S3 file system (pyarrow.fs
 * imports it only if it is there, and the tests read local files), 51 MB.
 */
const UNUSED_BY_PREFIX = {
  pyarrow: ['libarrow_flight.', 'libarrow_python_flight.', '_flight.', '_pyarrow_cpp_tests.', 'libarrow_s3.', '_s3fs.'],
};

/** Removes the named packages' test suites, pyarrow's unused libraries and the `unused` files of a Python target. */
function removeUnusedFiles(target, unused) {
  for (const name of PACKAGES_WITH_TEST_SUITES) {
    const dir = join(target, name);
    if (existsSync(dir)) for (const folder of foldersNamed(dir, 'tests')) rmSync(folder, { recursive: true, force: true });
  }
  for (const [name, prefixes] of Object.entries(UNUSED_BY_PREFIX)) {
    const dir = join(target, name);
    if (!existsSync(dir)) continue;
    for (const file of readdirSync(dir)) if (prefixes.some((prefix) => file.startsWith(prefix))) rmSync(join(dir, file), { force: true });
  }
  for (const file of unused) rmSync(join(target, file), { force: true });
}

/**
 * Shared libraries that wheels ship with their symbol tables, which nothing here debugs: `strip
 * --strip-unneeded` (what Debian does to every library it packages) takes 40 MB off polars' runtime
 * (170 MB) and 21 MB off pyarrow's Arrow libraries. Only these, by name: stripping every library
 * was tried, and numpy.libs' OpenBLAS (which auditwheel grafts in with patchelf) no longer loaded
 * ("ELF load command address/offset not page-aligned"). Each is written stripped beside itself and
 * renamed over itself only when smaller, so the library is whole at every moment and a stripped
 * one is left as it is.
 * Where there is no `strip` (binutils), nothing is stripped. Libraries under 1 MB are not worth it.
 */
const STRIPPED_LIBRARIES = [/^_polars_runtime_\d+\/_polars_runtime\.abi3\.so$/, /^pyarrow\/lib(arrow|parquet)[a-z_]*\.so\.\d+$/];

function stripLibraries(target) {
  for (const [path, size] of filesUnder(target)) {
    if (size < 2 ** 20 || !STRIPPED_LIBRARIES.some((pattern) => pattern.test(relative(target, path)))) continue;
    const stripped = `${path}.stripped-${process.pid}`;
    try {
      execFileSync('strip', ['--strip-unneeded', '-o', stripped, path], { stdio: 'ignore' });
    } catch (error) {
      rmSync(stripped, { force: true });
      if (error.code === 'ENOENT') return;
      continue;
    }
    if (lstatSync(stripped).size < size) renameSync(stripped, path);
    else rmSync(stripped, { force: true });
  }
}

/** Every regular file under `dir`, with its size. */
function filesUnder(dir, into = []) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) filesUnder(path, into);
    else if (entry.isFile()) into.push([path, lstatSync(path).size]);
  }
  return into;
}

/** Every regular file under `dirs` of 64 KB or more (smaller ones are not worth a link), by size. */
function filesBySize(dirs) {
  const bySize = new Map();
  for (const dir of dirs) {
    if (!existsSync(dir)) continue;
    for (const [path, size] of filesUnder(dir)) if (size >= 64 * 1024) bySize.set(size, [...(bySize.get(size) ?? []), path]);
  }
  return bySize;
}

function digest(path) {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

/**
 * Makes files of the same content under `dirs` (on one file system) one file with several names: a
 * hard link replaces each copy after the first, by rename over it, so no name is ever missing. Pip
 * replaces a file by writing a new one, never by writing into it, so a later install of one target
 * cannot change the other's.
 */
function linkIdenticalFiles(dirs) {
  for (const paths of filesBySize(dirs).values()) {
    if (paths.length < 2) continue;
    const firstOfDigest = new Map();
    for (const path of paths) {
      const sum = digest(path);
      const first = firstOfDigest.get(sum);
      if (first === undefined) firstOfDigest.set(sum, path);
      else if (lstatSync(first).ino !== lstatSync(path).ino) {
        const temporary = `${path}.link-${process.pid}`;
        linkSync(first, temporary);
        renameSync(temporary, path);
      }
    }
  }
}

/** Bumped whenever what slimTarget removes or links changes, so setup slims installed targets again. */
const SLIM_RECIPE = '2';

/**
 * Slims a Python target pip installed: the unused files and test suites out, libraries stripped, the bytecode pip
 * compiled out (targets installed before setup passed --no-compile had all of it, 102 MB; Python
 * writes what the tests import again as they run), and files identical to those
 * of `sharedWith` (another target) linked to them. Once per install: a marker in the target names
 * the recipe, this target's and the other's requirements. Gives about the bytes it freed (a file
 * linked to a copy counts as freed, the kept copy too), or 0 when the marker says it was done.
 */
export function slimTarget(target, { unused, sharedWith }) {
  const marker = join(target, 'SLIMMED');
  const wanted = [`recipe ${SLIM_RECIPE}`, readFileSync(join(target, 'REQUIREMENTS'), 'utf8'), ...(existsSync(join(sharedWith, 'REQUIREMENTS')) ? [readFileSync(join(sharedWith, 'REQUIREMENTS'), 'utf8')] : [])].join('\n---\n');
  if (existsSync(marker) && readFileSync(marker, 'utf8') === wanted) return 0;
  const before = unsharedBytes(target);
  removeUnusedFiles(target, unused);
  for (const folder of foldersNamed(target, '__pycache__')) rmSync(folder, { recursive: true, force: true });
  stripLibraries(target);
  linkIdenticalFiles([sharedWith, target]);
  writeFileSync(marker, wanted);
  return before - unsharedBytes(target);
}

/** Every folder named `name` under `dir`, without descending into them. */
function foldersNamed(dir, name) {
  const found = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    const path = join(dir, entry.name);
    if (entry.name === name) found.push(path);
    else found.push(...foldersNamed(path, name));
  }
  return found;
}

/** Bytes of the files under `dir` that have no other name: a file linked to another copy counts 0. */
function unsharedBytes(dir) {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) total += unsharedBytes(path);
    else if (entry.isFile()) {
      const { size, nlink } = lstatSync(path);
      if (nlink === 1) total += size;
    }
  }
  return total;
}
