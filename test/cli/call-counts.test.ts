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
import { runCli } from '../support/cli.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';

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
});
