/**
 * `harvester run` follows its run through a Temporal restart: Temporal (a dev server of its own,
 * persistent in SQLite) is stopped mid-run and started again on the same port and file; the
 * command says that Temporal does not answer and that the run goes on, waits, and ends with the
 * run's own outcome. (It exited 1, `Failed to get Workflow execution history`, while the run went on.)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/cli/free-port.js';
import { reachable } from '../../src/temporal/connection.js';
import { devServerArgs, TEMPORAL_BINARY } from '../../src/temporal/dev-server.js';
import { CLI } from '../support/cli.js';
import { startTestEmulator, waitFor, type TestEmulator } from '../support/emulator.js';

const API_KEY = 'sk_live_follow';
let emulator: TestEmulator;
let folder: string;
let port: number;
let uiPort: number;
let temporal: ChildProcess | undefined;

async function startTemporal(): Promise<void> {
  temporal = spawn(TEMPORAL_BINARY, devServerArgs({ port, uiPort, dbFile: join(folder, 'temporal.sqlite') }), { stdio: 'ignore' });
  await waitFor(async () => ((await reachable(`127.0.0.1:${port}`)) ? true : undefined), 60_000, 'Temporal to answer');
}

async function stopTemporal(): Promise<void> {
  const server = temporal;
  if (!server || server.exitCode !== null || server.signalCode !== null) return;
  const exited = new Promise((resolve) => server.once('exit', resolve));
  server.kill('SIGTERM');
  await exited;
}

beforeAll(async () => {
  folder = mkdtempSync(join(tmpdir(), 'follow-temporal-'));
  [port, uiPort] = [await freePort(), await freePort()];
  emulator = await startTestEmulator({ apiKeys: [API_KEY], latencyMs: 60 });
  await startTemporal();
}, 90_000);
afterAll(async () => {
  await stopTemporal();
  await emulator?.close();
});

describe('harvester run through a Temporal restart', () => {
  it('keeps waiting for its run, says so, and ends with the run\'s outcome', async () => {
    const catalog = await emulator.catalog();
    const config = join(folder, 'harvests.yaml');
    writeFileSync(
      config,
      `harvests:
  - name: follow
    budget: { credits: 20000 }
    concurrency: { targets: 2, calls: 4 }
    channels:
      - { platform: tiktok, handle: ${catalog.tiktok.handles[0]}, content: videos, max_items: 150 }
      - { platform: tiktok, handle: ${catalog.tiktok.handles[1]}, content: videos, max_items: 150 }
    enrich: { stats: true }
`,
    );
    const run = spawn(process.execPath, [CLI, 'run', 'follow', '--config', config, '--json'], {
      // Asks Temporal again 50 ms after an ask it did not answer, so that its next ask is made while
      // Temporal is still down (the dev server takes seconds to start again below), as the old wait
      // of 3 s past the message did against the default 2 s, and rides out the rest of the outage.
      env: { ...process.env, TEMPORAL_ADDRESS: `127.0.0.1:${port}`, HARVESTER_DATA_DIR: join(folder, 'data'), SOCIAL_API_BASE_URL: emulator.baseUrl, SOCIAL_API_KEY: API_KEY, HARVESTER_FOLLOW_RETRY_MS: '50' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    run.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    run.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => run.once('exit', resolve));
    try {
      await waitFor(async () => ((await emulator.ledger(API_KEY)).length >= 40 ? true : undefined), 60_000, '40 calls charged');
      await stopTemporal();
      await waitFor(() => (stderr.includes('Temporal does not answer') ? true : undefined), 60_000, 'the command to say Temporal does not answer').catch((error: Error) => {
        throw new Error(`${error.message}; its stderr: ${stderr}`);
      });
      await startTemporal();
      const code = await exited;
      expect(stderr).toContain('goes on, and this command waits for Temporal to come back');
      // And once Temporal answered, it said so, counting the asks it did not answer.
      const again = /^harvester: Temporal answered again, after (\d+) asks it did not answer over \d+ s$/m.exec(stderr);
      expect(again, stderr).not.toBeNull();
      expect(Number(again![1])).toBeGreaterThanOrEqual(1);
      expect(code, stderr).toBe(0);
      const summary = JSON.parse(stdout) as { status: string; itemsLanded: number };
      expect(summary).toMatchObject({ status: 'completed', itemsLanded: 300 });
    } finally {
      run.kill('SIGKILL');
    }
  }, 240_000);
});
