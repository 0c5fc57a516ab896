/**
 * Fail fast and clearly at start-up, and stop on signals: the real `harvester` CLI in its own
 * process, against the real Temporal dev server of the test run and the emulator over HTTP.
 */
import { spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/project-paths.js';
import { CLI, type CliResult } from '../support/cli.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { temporalClient } from '../support/temporal.js';
import { deadPort } from '../support/dead-port.js';

interface Finished extends CliResult {
  ms: number;
}

/**
 * The CLI as a child process, killed after `deadlineMs` if it has not exited by then (a command
 * that hangs fails the test instead of outliving it). `onStderr` sees stderr as it comes.
 */
function cli(args: string[], env: Record<string, string>, options: { deadlineMs: number; main?: string; onStderr?: (text: string, child: ReturnType<typeof spawn>) => void }): Promise<Finished> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const child = spawn(process.execPath, [options.main ?? CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const deadline = setTimeout(() => child.kill('SIGKILL'), options.deadlineMs);
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      options.onStderr?.(stderr, child);
    });
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(deadline);
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    });
  });
}

const KEY = 'sk_live_startup_tests';
let emulator: TestEmulator;
let dir: string;
let configFile: string;
let baseEnv: Record<string, string>;

beforeAll(async () => {
  // Slow answers, so a run is still going when it is signalled.
  emulator = await startTestEmulator({ apiKeys: [KEY], latencyMs: 200 });
  dir = mkdtempSync(join(tmpdir(), 'cli-startup-'));
  const handle = (await emulator.catalog()).tiktok.handles[3]!;
  configFile = join(dir, 'harvests.yaml');
  writeFileSync(configFile, `harvests:\n  - name: slow\n    budget: { credits: 100000 }\n    channels:\n      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 400 }\n    enrich: { stats: true }\n    concurrency: { targets: 1, calls: 1 }\n`);
  baseEnv = {
    TEMPORAL_ADDRESS: inject('temporalAddress'),
    HARVESTER_DATA_DIR: join(dir, 'data'),
    SOCIAL_API_BASE_URL: emulator.baseUrl,
    SOCIAL_API_KEY: KEY,
    LOG_LEVEL: 'error',
  };
});
afterAll(() => emulator.close());

/** Exactly one line on stderr, and not a stack trace. */
function oneLine(stderr: string): string {
  expect(stderr).not.toMatch(/\n\s+at /);
  expect(stderr.trim().split('\n')).toHaveLength(1);
  return stderr.trim();
}

describe('start-up failures say what and where, in one line', () => {
  it('an unreachable Temporal is named by its address, once, for run, worker, runs, show and schedules', async () => {
    const port = await deadPort(); // nothing listens there, nor will
    const env = { ...baseEnv, TEMPORAL_ADDRESS: `127.0.0.1:${port}` };
    const results = await Promise.all([
      cli(['run', 'slow', '--config', configFile], env, { deadlineMs: 30_000 }),
      cli(['worker'], env, { deadlineMs: 30_000 }),
      cli(['runs'], env, { deadlineMs: 30_000 }),
      cli(['show', 'run-nothing'], env, { deadlineMs: 30_000 }),
      cli(['schedules', 'list'], env, { deadlineMs: 30_000 }),
    ]);
    for (const result of results) {
      expect(result.code).toBe(1);
      const line = oneLine(result.stderr);
      expect(line).toMatch(new RegExp(`^harvester: cannot reach Temporal at 127\\.0\\.0\\.1:${port} \\(TEMPORAL_ADDRESS\\): `));
      expect(line.match(/cannot reach Temporal/g)).toHaveLength(1);
    }
  }, 45_000);

  it('a command that cannot reach Temporal says so from the refused connection (no timeout waited out), naming `harvester dev` and `harvester temporal`', async () => {
    const port = await deadPort(); // nothing listens there, nor will
    const env = { ...baseEnv, TEMPORAL_ADDRESS: `127.0.0.1:${port}` };
    const commands = [['runs'], ['show', 'run-nothing'], ['replay', 'run-nothing'], ['retry', 'run-nothing', '--no-local-worker'], ['run', 'slow', '--config', configFile, '--no-local-worker'], ['run', 'slow', '--config', configFile], ['worker'], ['schedules', 'list']];
    // One at a time, each its own process. The reason is the refusal itself ("connection refused"),
    // not a probe or connect timeout run out: how long that takes is the machine's load, not the
    // command's (a load of 15 once made a prompt answer take 2.1 s); bench/startup.mjs measures it.
    for (const args of commands) {
      const result = await cli(args, env, { deadlineMs: 15_000 });
      expect(result.code, args.join(' ')).toBe(1);
      const line = oneLine(result.stderr);
      expect(line).toMatch(new RegExp(`^harvester: cannot reach Temporal at 127\\.0\\.0\\.1:${port} \\(TEMPORAL_ADDRESS\\): connection refused; start it with \`harvester dev\` .* or \`harvester temporal\` .*${join(dir, 'data', 'temporal.sqlite').replace(/[.]/g, '\\.')}`));
    }
  }, 60_000);

  it('a worker refuses a data directory it cannot write, naming it, before it polls', async () => {
    // A data directory under a regular file: every write is refused (ENOTDIR), even as root.
    const file = join(dir, 'not-a-directory');
    writeFileSync(file, '');
    const dataDir = join(file, 'data');
    const result = await cli(['worker'], { ...baseEnv, HARVESTER_DATA_DIR: dataDir, HARVESTER_TASK_QUEUE: `startup-${Date.now()}` }, { deadlineMs: 20_000 });
    expect(result.code).toBe(1);
    expect(oneLine(result.stderr)).toBe(`harvester: the data directory ${dataDir} (HARVESTER_DATA_DIR) cannot be written (ENOTDIR): the worker does not start`);
  }, 30_000);

  it('run: a refused API key ends it before any run starts, in one line naming the API, without the key', async () => {
    const wrongKey = 'sk_live_not_a_key_of_the_emulator';
    const result = await cli(['run', 'slow', '--config', configFile], { ...baseEnv, SOCIAL_API_KEY: wrongKey, HARVESTER_TASK_QUEUE: `startup-${Date.now()}` }, { deadlineMs: 20_000 });
    expect(result.code).toBe(2);
    const line = oneLine(result.stderr);
    expect(line).toMatch(new RegExp(`^harvester: the API at ${emulator.baseUrl.replace(/[.]/g, '\\.')} refused SOCIAL_API_KEY: invalid_api_key: .*\\(request req_\\w+\\)$`));
    expect(line).not.toContain(wrongKey);
    expect(result.stderr).not.toContain('started');
  }, 30_000);

  it('a worker refuses to start without the prebuilt workflow bundle, or with one older than the workflows', async () => {
    // A copy of the built project without dist/workflow-bundle.js (the project's own stays intact
    // for the tests running beside this one).
    const copy = mkdtempSync(join(tmpdir(), 'cli-nobundle-'));
    cpSync(join(PROJECT_ROOT, 'package.json'), join(copy, 'package.json'));
    symlinkSync(join(PROJECT_ROOT, 'node_modules'), join(copy, 'node_modules'));
    symlinkSync(join(PROJECT_ROOT, 'config'), join(copy, 'config'));
    mkdirSync(join(copy, 'dist'));
    for (const part of ['src', 'workflows', 'activities']) cpSync(join(PROJECT_ROOT, 'dist', part), join(copy, 'dist', part), { recursive: true });
    const env = { ...baseEnv, HARVESTER_TASK_QUEUE: `startup-${Date.now()}` };
    const main = join(copy, 'dist', 'src', 'cli', 'main.js');
    try {
      const missing = await cli(['worker'], env, { deadlineMs: 20_000, main });
      expect(missing.code).toBe(1);
      expect(oneLine(missing.stderr)).toBe(`harvester: the workflow bundle ${join(copy, 'dist', 'workflow-bundle.js')} is missing: run npm run build`);

      cpSync(join(PROJECT_ROOT, 'dist', 'workflow-bundle.js'), join(copy, 'dist', 'workflow-bundle.js'));
      const old = new Date(Date.now() - 60_000);
      utimesSync(join(copy, 'dist', 'workflow-bundle.js'), old, old);
      const stale = await cli(['worker'], env, { deadlineMs: 20_000, main });
      expect(stale.code).toBe(1);
      expect(oneLine(stale.stderr)).toMatch(new RegExp(`^harvester: the workflow bundle ${join(copy, 'dist', 'workflow-bundle.js')} is older than ${join(copy, 'dist')}/(workflows|src)/\\S+\\.js: run npm run build$`));

      // Newer than every module but one the workflows import from src/harvest: still stale.
      utimesSync(join(copy, 'dist', 'workflow-bundle.js'), new Date(), new Date());
      const later = new Date(Date.now() + 60_000);
      utimesSync(join(copy, 'dist', 'src', 'harvest', 'rules.js'), later, later);
      const staleRules = await cli(['worker'], env, { deadlineMs: 20_000, main });
      expect(staleRules.code).toBe(1);
      expect(oneLine(staleRules.stderr)).toBe(`harvester: the workflow bundle ${join(copy, 'dist', 'workflow-bundle.js')} is older than ${join(copy, 'dist', 'src', 'harvest', 'rules.js')}: run npm run build`);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  }, 45_000);
});

describe('harvester run stops on SIGTERM as on Ctrl-C (SIGINT)', () => {
  for (const [signal, exitCode] of [['SIGTERM', 143], ['SIGINT', 130]] as const) {
    it(`${signal}: says what becomes of the run, stops its worker and exits ${exitCode}`, async () => {
      const taskQueue = `startup-${signal}-${Date.now()}`;
      let signalled = false;
      const result = await cli(['run', 'slow', '--config', configFile], { ...baseEnv, HARVESTER_TASK_QUEUE: taskQueue }, {
        deadlineMs: 40_000,
        onStderr: (text, child) => {
          if (!signalled && /^started \S+$/m.test(text)) {
            signalled = true;
            // Signalled while the run is under way: the first page (200 ms latency) is being bought.
            setTimeout(() => child.kill(signal), 1_000);
          }
        },
      });
      expect(signalled).toBe(true);
      const runId = /^started (\S+)$/m.exec(result.stderr)![1]!;
      expect(result.code).toBe(exitCode);
      expect(result.stderr).toContain(`harvester: ${signal}: stopped waiting; run ${runId} stays open in Temporal and a \`harvester worker\` on task queue "${taskQueue}" goes on with it\n`);
      expect(result.stderr).not.toMatch(/\n\s+at /);
      const client = await temporalClient();
      try {
        const handle = client.workflow.getHandle(runId);
        // Stopped without waiting for the run to end: left open, as said, for a worker to finish
        // (not cancelled, not failed).
        expect((await handle.describe()).status.name).toBe('RUNNING');
        await handle.terminate('test cleanup');
      } finally {
        await client.connection.close();
      }
    }, 60_000);
  }
});
