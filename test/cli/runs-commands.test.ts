import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/config/project-paths.js';
import { runCli } from '../support/cli.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';

let emulator: TestEmulator;
let env: Record<string, string>;
let configFile: string;
const name = `retry-me-${Date.now().toString(36)}`;

beforeAll(async () => {
  emulator = await startTestEmulator({ apiKeys: ['sk_live_cli_runs'] });
  const dir = mkdtempSync(join(tmpdir(), 'cli-runs-'));
  env = {
    TEMPORAL_ADDRESS: inject('temporalAddress'),
    HARVESTER_TASK_QUEUE: `cli-runs-${Date.now()}`,
    HARVESTER_DATA_DIR: join(dir, 'data'),
    SOCIAL_API_BASE_URL: emulator.baseUrl,
    SOCIAL_API_KEY: 'sk_live_cli_runs',
    LOG_LEVEL: 'error',
  };
  configFile = join(dir, 'harvests.yaml');
  const handle = (await emulator.catalog()).tiktok.handles[11]!;
  writeFileSync(configFile, `harvests:\n  - name: ${name}\n    budget: { credits: 200 }\n    channels:\n      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 150 }\n`);
});
afterAll(() => emulator.close());

describe('running and recovering harvests from the command line', () => {
  let runId: string;

  it('run: a budget too small stops cleanly as budget_exhausted, exit code 4', async () => {
    const result = await runCli(['run', name, '--config', configFile], env);
    expect(result.stderr).not.toMatch(/\n\s+at /);
    expect(result.code).toBe(4);
    runId = /^run (\S+) of /m.exec(result.stdout)![1]!;
    expect(result.stdout).toContain(`run ${runId} of ${name}: budget_exhausted`);
    expect(result.stdout).toMatch(/credits: 198 of 200; items: 66;/);
  }, 60_000);

  it('runs and show: list the run and detail its checkpoint', async () => {
    const runs = await runCli(['runs', '--name', name, '--json'], env);
    expect(runs.code).toBe(0);
    expect(JSON.parse(runs.stdout)).toEqual([expect.objectContaining({ workflowId: runId, harvest: name, status: 'budget_exhausted', items: 66, credits: 198, budget: 200 })]);
    const failedOnly = await runCli(['runs', '--status', 'completed', '--name', name, '--json'], env);
    expect(JSON.parse(failedOnly.stdout)).toEqual([]);
    const show = await runCli(['show', runId], env);
    expect(show.code).toBe(0);
    expect(show.stdout).toMatch(/budget_exhausted: 66\/150 items, 2 pages, 198 credits; checkpoint: cursor after page 2/);
  }, 60_000);

  it('retry: resumes from the checkpoint to completion, paying for no page twice', async () => {
    const result = await runCli(['retry', runId, '--budget', '1000'], env);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/: completed/);
    const ledger = await emulator.ledger('sk_live_cli_runs');
    // Every video bought once: 150 units in all, across the run and its retry.
    expect(ledger.reduce((sum, row) => sum + row.units, 0)).toBe(150);
    expect(ledger.reduce((sum, row) => sum + row.credits, 0)).toBe(450);
    const items = await runCli(['query', 'SELECT count(*) AS n, count(DISTINCT item_id) AS d FROM items', '--format', 'json'], env);
    expect(JSON.parse(items.stdout)).toEqual([{ n: '150', d: '150' }]);
  }, 60_000);

  it('replay: the run and a recorded history replay against the current code', async () => {
    const live = await runCli(['replay', runId], env);
    expect(live.code).toBe(0);
    expect(live.stdout).toContain('replay cleanly');
    const recorded = await runCli(['replay', '--history', join(PROJECT_ROOT, 'test', 'workflows', 'histories', 'job-by-polling.json')], env);
    expect(recorded.code).toBe(0);
    expect(recorded.stdout).toContain('job-by-polling.json: 43 events replay cleanly');
  }, 60_000);

  it('a config error names the file and line, and nothing runs', async () => {
    const bad = join(mkdtempSync(join(tmpdir(), 'cli-bad-')), 'bad.yaml');
    writeFileSync(bad, `harvests:\n  - name: broken\n    budget: { credits: 100 }\n    channels:\n      - { platform: tiktok, handle: "@someone", content: videos, max_items: 10 }\n`);
    const result = await runCli(['run', 'broken', '--config', bad], env);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`${bad}:5:`);
    expect(result.stderr).toContain('handle');
  });
});
