/**
 * `harvester worker`'s log, every line of it JSON: one line per run event (run started, each target finished, the load,
 * run ended), each naming the run, and a warning for a target that listed nothing. The built CLI
 * as its own process, the emulator over HTTP, real Temporal.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Client } from '@temporalio/client';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { CLI } from '../support/cli.js';
import { startTestEmulator, waitFor, type TestEmulator } from '../support/emulator.js';
import { harvestFrom, temporalClient } from '../support/temporal.js';
import { memoryLogger } from '../support/client.js';
import { temporalLoggerOf } from '../../src/cli/engine-context.js';

let emulator: TestEmulator;
let temporal: Client;
beforeAll(async () => {
  emulator = await startTestEmulator({ apiKeys: ['sk_live_worker_log'] });
  temporal = await temporalClient();
});
afterAll(async () => {
  await temporal.connection.close();
  await emulator.close();
});

function isJson(line: string): boolean {
  try {
    return typeof JSON.parse(line) === 'object';
  } catch {
    return false;
  }
}

interface LogLine {
  level: number;
  msg: string;
  run?: string;
  [field: string]: unknown;
}

describe('the worker log', () => {
  it('has a line for each run event, with the run id, and a warning for a target that listed nothing', async () => {
    const taskQueue = `worker-log-${Date.now().toString(36)}`;
    // The worker's own level: info, as a service logs by default.
    const { LOG_LEVEL: _level, ...inherited } = process.env;
    const worker: ChildProcess = spawn(process.execPath, [CLI, 'worker'], {
      env: {
        ...inherited,
        TEMPORAL_ADDRESS: inject('temporalAddress'),
        HARVESTER_TASK_QUEUE: taskQueue,
        HARVESTER_DATA_DIR: mkdtempSync(join(tmpdir(), 'worker-log-')),
        SOCIAL_API_BASE_URL: emulator.baseUrl,
        SOCIAL_API_KEY: 'sk_live_worker_log',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    worker.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => worker.once('exit', resolve));
    try {
      await waitFor(() => (stderr.includes('polling task queue') ? true : undefined), 30_000, 'the worker to poll').catch((error: Error) => {
        throw new Error(`${error.message}; its stderr: ${stderr}`);
      });
      const catalog = await emulator.catalog();
      const harvest = harvestFrom(`
harvests:
  - name: logged
    budget: { credits: 10000 }
    channels:
      - { platform: tiktok, handle: ${catalog.tiktok.handles[8]}, content: videos, max_items: 30 }
    searches:
      - { platform: tiktok, query: nothing matches this, max_results: 20 }
`);
      const runId = `run-logged-${Date.now().toString(36)}`;
      const summary = (await temporal.workflow.execute('harvestWorkflow', { taskQueue, workflowId: runId, args: [{ harvest }] })) as HarvestSummary;
      expect(summary.status).toBe('completed');
      worker.kill('SIGTERM');
      expect(await exited).toBe(0);

      // Every line of the log is JSON: the worker's own (its start included), the workflows', the SDK's.
      const notJson = stderr.split('\n').filter((line) => line !== '' && !isJson(line));
      expect(notJson).toEqual([]);
      const lines = stderr
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as LogLine);
      expect(lines.find((line) => /^polling task queue/.test(line.msg))).toMatchObject({ level: 30, taskQueue });
      const ofRun = lines.filter((line) => line.run === runId);
      const messages = ofRun.map((line) => line.msg);
      expect(messages[0]).toBe('run started');
      expect(messages.at(-1)).toBe('run ended');
      expect(messages.filter((msg) => msg === 'target finished')).toHaveLength(2);
      expect(messages).toContain('run loaded into the warehouse');
      expect(messages.indexOf('run loaded into the warehouse')).toBeGreaterThan(messages.lastIndexOf('target finished'));
      const INFO = 30;
      const WARN = 40;
      expect(ofRun.find((line) => line.msg === 'run started')).toMatchObject({ level: INFO, harvest: 'logged', budget: 10000, targets: 2 });
      expect(ofRun.find((line) => line.msg === 'target finished' && line.status === 'done')).toMatchObject({ level: INFO, target: `channel:tiktok:${catalog.tiktok.handles[8]}:videos`, items: 30 });
      expect(ofRun.find((line) => line.msg === 'target finished' && line.status === 'empty')).toMatchObject({ target: 'search:tiktok:keyword:nothing matches this', items: 0 });
      expect(ofRun.find((line) => line.msg === 'target returned no items')).toMatchObject({ level: WARN, target: 'search:tiktok:keyword:nothing matches this', warning: 'the API listed no items for it: check the query (nothing matches this)' });
      expect(ofRun.find((line) => line.msg === 'run loaded into the warehouse')).toMatchObject({ level: INFO, landings: summary.landingsLoaded });
      expect(ofRun.find((line) => line.msg === 'run ended')).toMatchObject({ level: INFO, status: 'completed', credits: summary.creditsSpent, items: 30 });
      // Workflow lines carry the workflow's own ids too, from the SDK.
      expect(ofRun.find((line) => line.msg === 'run ended')).toMatchObject({ workflowId: runId, taskQueue });
    } finally {
      if (worker.exitCode === null) worker.kill('SIGKILL');
    }
  }, 60_000);

  it('writes an error among the SDK\'s fields whole: a failed attempt\'s line says what failed, not only {"name":"CatalogError"}', () => {
    const { logger, lines } = memoryLogger();
    class CatalogError extends Error {
      override readonly name = 'CatalogError';
    }
    temporalLoggerOf(logger).warn('Activity failed', { error: new CatalogError('cannot read a call journal in the catalog postgres://…: connect ECONNREFUSED'), activityType: 'harvestTarget' });
    const line = JSON.parse(lines[0]!) as { msg: string; error: { type: string; message: string }; activityType: string };
    expect(line.msg).toBe('Activity failed');
    expect(line.error).toMatchObject({ type: 'CatalogError', message: 'cannot read a call journal in the catalog postgres://…: connect ECONNREFUSED' });
    expect(line.activityType).toBe('harvestTarget');
  });
});
