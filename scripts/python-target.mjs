/**
 * What scripts/setup.mjs removes from the tests' Python target after pip installed it, and how it
 * keeps one copy of a file that two targets both hold: the wheels bring their own test suites,
 * libraries no test loads, and (in .tools/analysts and .tools/python) the same DuckDB twice. Every
 * removal here is of a path named below, never a pattern over every package: dbt, for one, keeps
 * runtime macros in folders named `tests` (dbt/include/global_project/macros/materializations/tests).
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, existsSync, fsyncSync, linkSync, lstatSync, openSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';

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

/**
 * Files no test loads, by a pattern over the names in one package's folder: pyarrow's Python glue
 * libraries under their link-time names (`libarrow_python.so`, and `.so.2600.1.0`, the full
 * version): pip copies a wheel's symbolic links as files, and these two names serve only a linker
 * building against pyarrow; every module loads the library by its SONAME (`libarrow_python.so.2600`,
 * kept), 2.4 MB.
 */
const UNUSED_BY_PATTERN = {
  pyarrow: [/^libarrow_python[a-z_]*\.so(\.\d+\.\d+\.\d+)?$/, /\.(pxd|pxi|pyx)$/],
};

/**
 * Sources no test compiles, by path inside the target: pyarrow's C++ headers and sources for
 * building extensions against it (`pyarrow.get_include()` only names the folder) and, with the
 * pattern above, its Cython sources and declarations (compiled into its modules already; Python
 * never reads them), 8 MB.
 */
const UNUSED_FOLDERS = ['pyarrow/include', 'pyarrow/src', 'pyarrow/includes'];

/**
 * Babel's locale data (36 MB, one file per CLDR locale) is read by dbt through agate only to format
 * numbers in its tables, in agate's default locale: en_US, or the LC_NUMERIC/LANG locale of the
 * process (C and POSIX are en_US_POSIX). Kept: `root`, the base every locale inherits from, and every
 * English locale (1 MB); a test run under another language's locale reaches babel only if dbt prints
 * an agate table, which `dbt build` of examples/dbt does not (its test passes under de_DE.UTF-8).
 */
const BABEL_LOCALE_DATA = join('babel', 'locale-data');
const BABEL_LOCALES_KEPT = /^(root|en|en_[A-Za-z0-9_]+)\.dat$/;

/** Removes the named packages' test suites, pyarrow's unused libraries, headers and sources, babel's locales but English, and the `unused` files of a Python target. */
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
  for (const [name, patterns] of Object.entries(UNUSED_BY_PATTERN)) {
    const dir = join(target, name);
    if (!existsSync(dir)) continue;
    for (const file of readdirSync(dir)) if (patterns.some((pattern) => pattern.test(file))) rmSync(join(dir, file), { force: true });
  }
  for (const folder of UNUSED_FOLDERS) rmSync(join(target, folder), { recursive: true, force: true });
  const localeData = join(target, BABEL_LOCALE_DATA);
  if (existsSync(localeData)) for (const file of readdirSync(localeData)) if (file.endsWith('.dat') && !BABEL_LOCALES_KEPT.test(file)) rmSync(join(localeData, file), { force: true });
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
 * Where there is no `strip` (binutils), nothing is stripped. Libraries under 256 KB are not worth it.
 */
const STRIPPED_LIBRARIES = [
  /^_polars_runtime_\d+\/_polars_runtime\.abi3\.so$/,
  /^pyarrow\/lib(arrow|parquet)[a-z_]*\.so\.\d+$/,
  // pyarrow's own modules, PyYAML's and msgpack's C modules: built with their symbols, none of
  // them patched by auditwheel (no RPATH but pyarrow's $ORIGIN, set by its build), about 5 MB.
  /^pyarrow\/_?[a-z_]+\.cpython-[^/]+\.so$/,
  /^yaml\/_yaml\.cpython-[^/]+\.so$/,
  /^msgpack\/_cmsgpack\.cpython-[^/]+\.so$/,
];

function stripLibraries(target) {
  for (const [path, size] of filesUnder(target)) {
    if (size < 256 * 1024 || !STRIPPED_LIBRARIES.some((pattern) => pattern.test(relative(target, path)))) continue;
    if (stripFile(path, size, ['--strip-unneeded']) === 'no strip') return;
  }
}

/**
 * Writes `path` stripped (with `options`) beside itself and renames that over it when smaller, so
 * the file is whole at every moment. Gives 'no strip' where binutils' strip is not installed.
 */
function stripFile(path, size, options) {
  const stripped = `${path}.stripped-${process.pid}`;
  try {
    execFileSync('strip', [...options, '-o', stripped, path], { stdio: 'ignore' });
  } catch (error) {
    rmSync(stripped, { force: true });
    return error.code === 'ENOENT' ? 'no strip' : 'failed';
  }
  if (lstatSync(stripped).size < size) {
    // On disk before its name replaces the whole file, and the new name on disk after.
    fsyncPath(stripped);
    renameSync(stripped, path);
    fsyncPath(dirname(path));
    return 'stripped';
  }
  rmSync(stripped, { force: true });
  return 'kept';
}

function fsyncPath(path) {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Programs that a wheel ships with their symbol tables, stripped whole (`strip`, symbol table and
 * debug information both: a program exports nothing a linker needs, and its dynamic symbols, which
 * the DuckDB extensions it loads bind to, are not touched): DuckDB's CLI in .tools/analysts, 59 MB,
 * 11 MB of them its symbol table. Once per install of `target`: the STRIPPED marker names its
 * requirements. Gives the bytes it freed.
 */
export function stripPrograms(target, programs) {
  const marker = join(target, 'STRIPPED');
  const wanted = `${programs.join('\n')}\n---\n${readFileSync(join(target, 'REQUIREMENTS'), 'utf8')}`;
  if (existsSync(marker) && readFileSync(marker, 'utf8') === wanted) return 0;
  let freed = 0;
  for (const program of programs) {
    const path = join(target, program);
    if (!existsSync(path)) continue;
    const size = lstatSync(path).size;
    if (stripFile(path, size, []) === 'no strip') return freed;
    freed += size - lstatSync(path).size;
  }
  writeFileSync(marker, wanted);
  return freed;
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
      else linkOver(first, path);
    }
  }
}

/**
 * The same for small files at the same path in both targets, which the size rule above leaves
 * out: a package both install at one version (pytz's 600 zone files, 3 MB of blocks) is one copy.
 */
function linkSamePathFiles(sharedWith, target) {
  if (!existsSync(sharedWith)) return;
  for (const [path, size] of filesUnder(sharedWith)) {
    const inside = relative(sharedWith, path);
    // Not the markers at the top (REQUIREMENTS, STRIPPED), which setup rewrites in place.
    if (!inside.includes(sep)) continue;
    const twin = join(target, inside);
    if (size >= 64 * 1024 || !existsSync(twin) || !lstatSync(twin).isFile() || lstatSync(twin).size !== size) continue;
    if (digest(twin) === digest(path)) linkOver(path, twin);
  }
}

/** Makes `copy` another name of `kept`, by rename over it, so no name is ever missing. */
function linkOver(kept, copy) {
  if (lstatSync(kept).ino === lstatSync(copy).ino) return;
  const temporary = `${copy}.link-${process.pid}`;
  linkSync(kept, temporary);
  renameSync(temporary, copy);
}

/** Bumped whenever what slimTarget removes or links changes, so setup slims installed targets again. */
const SLIM_RECIPE = '4';

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
  linkSamePathFiles(sharedWith, target);
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
