/**
 * One run's calls, counted by each thing that counts them: the run's summary, `harvester show`,
 * the warehouse's `api_calls` and the report. They follow one rule (src/harvest/enrichment-tally.ts):
 * a call is answered and landed, one row of `api_calls`; a TikTok download the API refuses
 * without charge is skipped, not a call.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { WorkflowFailedError } from '@temporalio/client';
import { apiIdentity } from '../../src/api/identity.js';
import type { HarvestInput } from '../../workflows/harvest.js';
import { runCli } from '../support/cli.js';
import { clientFor } from '../support/client.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { harvestFrom, startTestWorker, temporalClient } from '../support/temporal.js';

let emulator: TestEmulator;
let dir: string;
let env: Record<string, string>;

beforeAll(async () => {
  emulator = await startTestEmulator({ apiKeys: ['sk_live_call_counts'] });
  dir = mkdtempSync(join(tmpdir(), 'call-counts-'));
  env = {
    TEMPORAL_ADDRESS: inject('temporalAddress'),
    HARVESTER_TASK_QUEUE: `call-counts-${Date.now()}`,
    HARVESTER_DATA_DIR: join(dir, 'data'),
    SOCIAL_API_BASE_URL: emulator.baseUrl,
    SOCIAL_API_KEY: 'sk_live_call_counts',
    LOG_LEVEL: 'error',
  };
});
afterAll(async () => {
  await emulator?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the calls of a run', () => {
  it('are the same count in its summary, show, api_calls and the report; refused TikTok downloads are skipped, not calls', async () => {
    const handle = (await emulator.catalog()).tiktok.handles[5]!;
    const config = join(dir, 'harvests.yaml');
    const name = `counted-${Date.now().toString(36)}`;
    writeFileSync(config, `harvests:\n  - name: ${name}\n    budget: { credits: 10000 }\n    channels:\n      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 6 }\n    enrich: { stats: true, download: true }\n`);
    const run = await runCli(['run', name, '--config', config], env);
    expect(run.code, run.stderr).toBe(0);
    const runId = /^run (\S+) of /m.exec(run.stdout)![1]!;
    // Six videos, each with its stats bought and its download refused (download_unavailable).
    expect(run.stdout).toMatch(/^enrichment: 6 calls, 6 skipped, 0 failed$/m);
    const pages = Number(/^channel:tiktok:\S+ +done +6 +(\d+) /m.exec(run.stdout)![1]);

    const show = await runCli(['show', runId, '--json'], env);
    expect(show.code, show.stderr).toBe(0);
    expect(JSON.parse(show.stdout)).toMatchObject({ enrichment: { calls: 6, skipped: 6, failed: 0 } });
    expect((await runCli(['show', runId], env)).stdout).toMatch(/^enrich: +6 calls, 6 skipped, 0 failed,/m);

    const counted = await runCli(
      ['query', `SELECT count(*) FILTER (WHERE split_part(endpoint, '/', 2) IN ('stats', 'download')) AS enrichment, count(*) AS calls, count(*) FILTER (WHERE endpoint = 'tiktok/download') AS downloads FROM api_calls WHERE run_id = '${runId}'`, '--format', 'json'],
      env,
    );
    expect(counted.code, counted.stderr).toBe(0);
    expect(JSON.parse(counted.stdout)).toEqual([{ enrichment: 6, calls: pages + 6, downloads: 0 }]);

    const out = join(dir, 'report.html');
    const report = await runCli(['report', '--out', out], env);
    expect(report.code, report.stderr).toBe(0);
    const card = /<span class="value">([^<]+)<\/span><span class="label">Billed API calls<\/span>/.exec(readFileSync(out, 'utf8'))?.[1];
    expect(Number(card?.replaceAll(',', ''))).toBe(pages + 6);
  }, 120_000);

  it('a run that failed before the warehouse recorded it (its key refused) is in the report\'s failures with its reason, and counted with the runs', async () => {
    // A worker of this task queue and data directory, whose key is another than the one the run
    // was started for: it refuses the run's first task, and the run fails before it records itself.
    const api = clientFor(emulator, { apiKey: 'sk_live_call_counts' });
    const worker = await startTestWorker(api, { dataDir: env.HARVESTER_DATA_DIR, taskQueue: env.HARVESTER_TASK_QUEUE });
    const temporal = await temporalClient();
    const runId = `wrong-key-${Date.now()}`;
    try {
      const handle = (await emulator.catalog()).tiktok.handles[6]!;
      const input: HarvestInput = {
        harvest: harvestFrom(`harvests:\n  - name: wrong-key\n    budget: { credits: 1000 }\n    channels:\n      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 5 }\n`),
        api: apiIdentity({ baseUrl: emulator.baseUrl, apiKey: 'sk_live_another_key' }),
      };
      const failure = await temporal.workflow.execute('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId: runId, args: [input] }).then(() => undefined, (error: unknown) => error);
      expect(failure).toBeInstanceOf(WorkflowFailedError);
    } finally {
      await worker.stop();
      await temporal.connection.close();
      await api.close();
    }
    const count = async (sql: string) => (JSON.parse((await runCli(['query', sql, '--format', 'json'], env)).stdout) as { n: number }[])[0]!.n;
    expect(await count(`SELECT count(*) AS n FROM harvest_runs WHERE run_id = '${runId}'`)).toBe(0);
    // The first test's run, in the warehouse; this one, in Temporal only.
    expect(await count('SELECT count(*) AS n FROM harvest_runs')).toBe(1);

    const out = join(dir, 'report-wrong-key.html');
    const report = await runCli(['report', '--out', out], env);
    expect(report.code, report.stderr).toBe(0);
    const page = readFileSync(out, 'utf8');
    const failures = /<section class="report-section" id="failures"[\s\S]*?<\/section>/.exec(page)![0];
    const row = new RegExp(`<td class="id">${runId}</td>\\n<td>(.*)</td>[\\s\\S]*?<td class="error">([^<]*)</td>`).exec(failures);
    expect(row, failures).not.toBeNull();
    expect(row![1]).toContain('in Temporal only');
    expect(row![2], row![2]).toMatch(/^the run could not start: the run&#39;s API key is not the one the worker uses/);
    expect(row![2]).not.toContain('sk_live_');
    const card = (label: string) => Number(new RegExp(`<span class="value">([^<]+)</span><span class="label">${label}</span>`).exec(page)![1]);
    expect(card('Harvest runs')).toBe(2);
    expect(card('Failed / paused runs')).toBe(1);
    // Without Temporal, the page says it could not look.
    const alone = await runCli(['report', '--out', out], { ...env, TEMPORAL_ADDRESS: '127.0.0.1:9' });
    expect(alone.code, alone.stderr).toBe(0);
    expect(readFileSync(out, 'utf8')).toContain('Runs that stopped before the warehouse recorded them are not listed: Temporal did not answer at 127.0.0.1:9 (TEMPORAL_ADDRESS).');
  }, 120_000);
});
