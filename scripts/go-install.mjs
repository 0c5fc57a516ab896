/**
 * `go install` of a Go program into a folder of the project, leaving nothing else behind: Go's
 * module cache, build cache and GOPATH (2.2 GB for the MinIO server) go to a temporary folder
 * inside the tools folder, removed once the binary is installed; and Go's telemetry, which writes
 * counters to the user's config folder (os.UserConfigDir()/go/telemetry) even with GOTELEMETRY=off
 * in the environment (go 1.26 reads its mode only from that folder), is pointed at that temporary
 * folder and turned off there before the build. The user's own `go env -w` settings (a GOPROXY,
 * say) still apply: GOENV names their file. Used by scripts/setup.mjs.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { homedir, platform } from 'node:os';
import { join } from 'node:path';

/** The user's `go env -w` file, where Go looks for it (os.UserConfigDir()/go/env) unless GOENV says. */
function userGoEnvFile() {
  if (process.env.GOENV) return process.env.GOENV;
  const configDir = platform() === 'darwin' ? join(homedir(), 'Library', 'Application Support') : process.env.XDG_CONFIG_HOME || join(homedir(), '.config');
  return join(configDir, 'go', 'env');
}

/** Runs `command` with `args`, its stderr shown; resolves when it exits 0, rejects naming it otherwise. */
function run(command, args, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'ignore', 'inherit'] });
    child.once('error', reject);
    child.once('exit', (code, signal) => (code === 0 ? resolve() : reject(new Error(`\`${command} ${args.join(' ')}\` failed (${signal ?? `exit code ${code}`})`))));
  });
}

/**
 * Installs `module` (`path@version`) into `bin`, building in a temporary folder inside `tools`
 * that is removed afterwards, whether the build worked or not. Asynchronous, so that setup can go
 * on with its other steps while Go compiles (MinIO's build is minutes of it).
 */
export async function goInstall(module, { tools, bin }) {
  mkdirSync(tools, { recursive: true });
  const scratch = mkdtempSync(join(tools, 'go-build-'));
  const env = {
    ...process.env,
    GOBIN: bin,
    GOPATH: join(scratch, 'path'),
    GOMODCACHE: join(scratch, 'mod'),
    GOCACHE: join(scratch, 'cache'),
    // Module files writable, so the folder can be removed even if `go clean -modcache` fails.
    GOFLAGS: '-modcacherw',
    GOTELEMETRY: 'off',
    // Pure Go, as MinIO's and Prometheus's own release builds are: no C compiler needed, and no cgo
    // step (runtime/cgo, net, os/user) in the build.
    CGO_ENABLED: '0',
    GOENV: userGoEnvFile(),
    XDG_CONFIG_HOME: join(scratch, 'config'),
    HOME: process.env.HOME ?? homedir(),
  };
  try {
    await run('go', ['telemetry', 'off'], env);
    // Without the symbol table and debug information: a third smaller (MinIO's and promtool's
    // binaries are over 100 MB each), and nothing here debugs them. -trimpath: no path of this
    // machine (the temporary GOPATH) in the binary, so the same version builds the same bytes.
    await run('go', ['install', '-trimpath', '-ldflags=-s -w', module], env);
  } finally {
    try {
      // Module cache files are read-only when built without -modcacherw; go's own clean removes them regardless.
      execFileSync('go', ['clean', '-modcache'], { env, stdio: 'ignore' });
    } catch {
      // Removed below all the same (the files are writable: -modcacherw).
    }
    rmSync(scratch, { recursive: true, force: true });
  }
}

/**
 * How a binary built by goInstall shows in its build information: `-trimpath=true`. Go leaves the
 * linker flags out of the build information of a -trimpath build (they may hold paths), so the
 * `-ldflags="-s -w"` line is there only in builds of goInstall before it passed -trimpath; either
 * says the binary was built stripped. Checking only for the -ldflags line rebuilt MinIO (139 s)
 * at every setup of a fresh clone.
 */
const STRIPPED_BUILD_SETTINGS = ['build\t-trimpath=true\n', 'build\t-ldflags="-s -w"\n'];

/**
 * The version of `modulePath` that the Go binary `binary` was built from, as `path@version`, or
 * undefined when there is no such binary, it names no such module, or it was built with its symbol
 * table (without goInstall's -ldflags="-s -w", as setups before it passed them did), so that such
 * a build is replaced once by a stripped one, and a stripped one is kept. Read from the build
 * information Go writes into every binary (a "mod<TAB>path<TAB>version" line and a
 * "build<TAB>-ldflags=..." line, kept by -s -w too), rather than with `go version -m`, which would
 * write telemetry counters to the user's config folder.
 */
export function installedGoModule(binary, modulePath) {
  if (!existsSync(binary)) return undefined;
  const content = readFileSync(binary);
  const marker = Buffer.from(`mod\t${modulePath}\t`);
  const at = content.indexOf(marker);
  if (at < 0) return undefined;
  const start = at + marker.length;
  const end = content.indexOf('\t', start);
  if (end < 0 || end - start > 200) return undefined;
  if (!STRIPPED_BUILD_SETTINGS.some((setting) => content.indexOf(setting) >= 0)) return undefined;
  return `${modulePath}@${content.subarray(start, end).toString('latin1')}`;
}
