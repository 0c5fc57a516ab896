/**
 * A worker's start asks the API whether it takes the key (src/cli/api-key-check.ts) and makes the
 * worker meanwhile (its workflows loaded, its load process started): the key's answer holds back
 * only the polling. A key accepted earlier that day is not asked about; the API's pace is learnt
 * instead, with a free call nothing waits for (src/cli/engine-context.ts). Against an API of the
 * test's own that holds the answers to GET /v1/webhooks until the test gives them, and the real
 * Temporal dev server.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { apiIdentity } from '../../src/api/identity.js';
import { apiKeyAcceptedFile } from '../../src/store/layout.js';
import { CLI } from '../support/cli.js';
import { waitFor } from '../support/emulator.js';
import { alive, descendants } from '../support/processes.js';
import { listenersWhenWriting, preloadRecorder } from '../support/preload.js';

let server: Server;
/** The key checks (and pace calls) asked and not answered yet. */
const held: ServerResponse[] = [];
const API_KEY = 'sk_live_worker_start_0001';
const apiBaseUrl = () => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
const dirs: string[] = [];
let child: ChildProcess | undefined;

beforeAll(async () => {
  server = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.method === 'GET' && req.url?.startsWith('/v1/webhooks')) held.push(res);
    else res.writeHead(404).end(JSON.stringify({ error: { code: 'not_found', message: 'not here' }, request_id: 'req_0000000000000009' }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
});
afterEach(async () => {
  if (child && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((resolve) => child!.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }
  for (const res of held.splice(0)) res.destroy();
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Starts `harvester worker` against the holding API; its log so far, as it grows. */
function startWorker({ keyAcceptedEarlier = false, env = {} as Record<string, string> } = {}): { log: () => string; exited: Promise<number | null> } {
  const dataDir = mkdtempSync(join(tmpdir(), 'worker-start-'));
  dirs.push(dataDir);
  if (keyAcceptedEarlier) {
    // The record the key check leaves (src/cli/api-key-check.ts), written an hour ago.
    const record = apiKeyAcceptedFile(dataDir);
    mkdirSync(dirname(record), { recursive: true });
    writeFileSync(record, JSON.stringify({ ...apiIdentity({ baseUrl: apiBaseUrl(), apiKey: API_KEY }), acceptedAt: new Date(Date.now() - 3_600_000).toISOString() }));
  }
  child = spawn(process.execPath, [CLI, 'worker'], {
    env: {
      ...process.env,
      SOCIAL_API_BASE_URL: apiBaseUrl(),
      SOCIAL_API_KEY: API_KEY,
      HARVESTER_DATA_DIR: dataDir,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      HARVESTER_TASK_QUEUE: `worker-start-${Math.random().toString(36).slice(2, 10)}`,
      ...env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (log += chunk));
  const exited = new Promise<number | null>((resolve) => child!.once('exit', (code) => resolve(code)));
  return { log: () => log, exited };
}

/** What `check` finds, waited for while the worker runs: a worker that exited first fails the wait at once, with its log. */
function whileRunning<T>(worker: { log: () => string }, check: () => T | undefined, what: string): Promise<T> {
  return waitFor(
    () => {
      if (child!.exitCode !== null || child!.signalCode !== null) throw new Error(`the worker exited (${child!.exitCode ?? child!.signalCode}) before ${what}: ${worker.log()}`);
      return check();
    },
    60_000,
    `${what} (the worker's log: ${worker.log()})`,
  );
}

/** The worker's load process, once it runs (a child of the worker running src/warehouse/load-process.js). */
function loadProcessOf(worker: ChildProcess): number | undefined {
  return descendants(worker.pid!).find((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('load-process.js');
    } catch {
      return false;
    }
  });
}

describe('a worker\'s start, while the API answers the key check', () => {
  it('makes the worker and starts its load process before the answer, and polls only after it', async () => {
    const worker = startWorker();
    await whileRunning(worker, () => (held.length > 0 ? true : undefined), 'the worker asked the API about its key');
    // Before its start was made of two halves, one after the other, nothing of the worker was made until the answer came.
    const loadProcess = await whileRunning(worker, () => loadProcessOf(child!), "the worker's load process started while the key check waits");
    expect(alive(loadProcess)).toBe(true);
    expect(worker.log()).not.toMatch(/polling task queue/);
    held.shift()!.writeHead(200).end(JSON.stringify({ data: [], request_id: 'req_0000000000000001' }));
    await whileRunning(worker, () => (/polling task queue/.test(worker.log()) ? true : undefined), 'the worker polled');
    child!.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
  });

  it('a key refused after the worker was made ends the start in one line naming the API, not the key, and leaves no load process behind', async () => {
    const worker = startWorker();
    await whileRunning(worker, () => (held.length > 0 ? true : undefined), 'the worker asked the API about its key');
    const loadProcess = await whileRunning(worker, () => loadProcessOf(child!), "the worker's load process started while the key check waits");
    held.shift()!.writeHead(401).end(JSON.stringify({ error: { code: 'invalid_api_key', message: 'the API key is not valid' }, request_id: 'req_0000000000000002' }));
    expect(await worker.exited).toBe(2);
    expect(worker.log()).toMatch(/refused SOCIAL_API_KEY: invalid_api_key/);
    expect(worker.log()).not.toContain('sk_live_worker_start_0001');
    expect(worker.log()).not.toMatch(/polling task queue/);
    await waitFor(() => (alive(loadProcess) ? undefined : true), 60_000, 'the load process to exit with its worker');
  });

  it('with its key accepted earlier that day, polls without waiting for the API, and learns the API\'s pace meanwhile with one free call', async () => {
    const worker = startWorker({ keyAcceptedEarlier: true });
    // Polling while the call is held: nothing of the start waits for it.
    await whileRunning(worker, () => (/polling task queue/.test(worker.log()) ? true : undefined), 'the worker polled');
    // Before, nothing was asked: the first run's first calls went one at a time behind the first answer (rate-gate.ts).
    await whileRunning(worker, () => (held.length > 0 ? true : undefined), 'the worker asked the API its pace');
    expect(held).toHaveLength(1);
    held.shift()!.writeHead(200, { 'x-ratelimit-limit': '50', 'x-ratelimit-remaining': '49' }).end(JSON.stringify({ data: [], request_id: 'req_0000000000000003' }));
    child!.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
    expect(held).toHaveLength(0);
  });

  it('stops on SIGTERM from the moment it says it polls: its handler is there when the line is written', async () => {
    // A recorder preloaded into the worker notes, as the logger hands the line over to be written
    // (fs.write to fd 2, done by libuv's thread pool, which may write it before the main thread goes
    // on), how many SIGINT and SIGTERM listeners the process has. None meant a SIGTERM sent on reading the line
    // could kill the worker outright (exit by signal) before it listened: it did, under load, once in CI.
    const dir = mkdtempSync(join(tmpdir(), 'worker-start-recorder-'));
    dirs.push(dir);
    const recorder = preloadRecorder(dir, 'listeners', listenersWhenWriting('polling task queue'));
    const worker = startWorker({ keyAcceptedEarlier: true, env: recorder.env });
    await whileRunning(worker, () => (/polling task queue/.test(worker.log()) ? true : undefined), 'the worker polled');
    expect(recorder.recorded()).toEqual(['SIGINT listeners 1, SIGTERM listeners 1']);
    await whileRunning(worker, () => (held.length > 0 ? true : undefined), 'the worker asked the API its pace');
    held.shift()!.writeHead(200).end(JSON.stringify({ data: [], request_id: 'req_0000000000000004' }));
    child!.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
  });
});
