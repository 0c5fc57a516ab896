/**
 * Where a worker runs its workflows (src/temporal/worker.ts): `harvester run`'s local worker, which
 * serves its command's one run, on its main thread, under the same 5 s limit an activation has on a
 * workflow thread; `harvester worker`, standing for months, on a workflow thread of its own.
 * The real CLI in its own processes, with a recorder preloaded (NODE_OPTIONS) that notes every
 * worker thread the process starts and the time limit of every script run in a V8 context on its
 * main thread, against the emulator and the real Temporal dev server.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { CLI, runCli } from '../support/cli.js';
import { startTestEmulator, waitFor, type TestEmulator } from '../support/emulator.js';
import { preloadRecorder } from '../support/preload.js';

const KEY = 'sk_live_workflow_thread';
let emulator: TestEmulator;
let dir: string;

beforeAll(async () => {
  emulator = await startTestEmulator({ apiKeys: [KEY] });
  dir = mkdtempSync(join(tmpdir(), 'workflow-thread-'));
});
afterAll(async () => {
  await emulator?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Every worker thread the process starts, and the time limit of each script it runs in a V8 context on its main thread. */
const THREADS_AND_TIMEOUTS = [
  "const threads = require('node:worker_threads');",
  'const Started = threads.Worker;',
  'threads.Worker = class extends Started { constructor(file, options) { appendFileSync(log, `thread ${file}\\n`); super(file, options); } };',
  "const vm = require('node:vm');",
  'const runInContext = vm.Script.prototype.runInContext;',
  "vm.Script.prototype.runInContext = function (context, options) { if (threads.isMainThread) appendFileSync(log, `script timeout ${options?.timeout ?? 'none'}\\n`); return runInContext.call(this, context, options); };",
];

const environment = (name: string) => {
  const recorder = preloadRecorder(dir, name, THREADS_AND_TIMEOUTS);
  return {
    env: {
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      TEMPORAL_HTTP_ADDRESS: inject('temporalHttpAddress'),
      HARVESTER_DATA_DIR: join(dir, `${name}-data`),
      SOCIAL_API_BASE_URL: emulator.baseUrl,
      SOCIAL_API_KEY: KEY,
      LOG_LEVEL: 'error',
      ...recorder.env,
    },
    recorded: recorder.recorded,
  };
};

describe('where the workflows run', () => {
  it('`harvester run`\'s local worker runs them on its main thread, each activation limited to 5 s, and the run completes', async () => {
    const handle = (await emulator.catalog()).tiktok.handles[0]!;
    const config = join(dir, 'harvests.yaml');
    writeFileSync(config, `harvests:\n  - name: main-thread\n    budget: { credits: 100000 }\n    channels:\n      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 100 }\n    enrich: { stats: true }\n`);
    const { env, recorded } = environment('run');
    const result = await runCli(['run', 'main-thread', '--config', config, '--json'], env);
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({ status: 'completed', itemsLanded: 100, enrichment: { calls: 100 } });
    const lines = recorded();
    expect(lines.filter((line) => line.includes('workflow-worker-thread'))).toEqual([]);
    // The workflow's activations, run in its context on the main thread: every one under the limit.
    const limited = lines.filter((line) => line.startsWith('script timeout ') && line !== 'script timeout none');
    expect(limited.length).toBeGreaterThan(0);
    expect(new Set(limited)).toEqual(new Set(['script timeout 5000']));
  });

  it('`harvester worker` runs them on a workflow thread of its own', async () => {
    const { env, recorded } = environment('worker');
    const child = spawn(process.execPath, [CLI, 'worker'], { env: { ...process.env, ...env, HARVESTER_TASK_QUEUE: `workflow-thread-${process.pid}` }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      const started = await waitFor(() => recorded().find((line) => line.includes('workflow-worker-thread')) ?? (child.exitCode === null ? undefined : `exited: ${stderr}`), 60_000, 'the worker\'s workflow thread');
      expect(started).toMatch(/^thread .*workflow-worker-thread/);
      expect(recorded().filter((line) => line === 'script timeout 5000')).toEqual([]);
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
  });
});
