import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/project-paths.js';
import type { WorkflowExecutionInfo } from '@temporalio/client';
import { SocialApiClient } from '../../src/api/client.js';
import { runCli } from '../support/cli.js';
import { startTestEmulator, waitFor, type TestEmulator } from '../support/emulator.js';
import { harvestFrom, prices, startTestWorker, temporalClient } from '../support/temporal.js';

let emulator: TestEmulator;
let env: Record<string, string>;
let configFile: string;
let dir: string;
const name = `retry-me-${Date.now().toString(36)}`;

beforeAll(async () => {
  emulator = await startTestEmulator({ apiKeys: ['sk_live_cli_runs'] });
  dir = mkdtempSync(join(tmpdir(), 'cli-runs-'));
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
    // No match is said so, not shown as a bare header.
    const none = await runCli(['runs', '--status', 'completed', '--name', name], env);
    expect(none.code).toBe(0);
    expect(none.stdout).toBe(`no runs with status completed and harvest ${name} on Temporal at ${env.TEMPORAL_ADDRESS} (namespace default)\n`);
    const show = await runCli(['show', runId], env);
    expect(show.code).toBe(0);
    expect(show.stdout).toMatch(/budget_exhausted: 66\/150 items, 2 pages, 198 credits; checkpoint: cursor after page 2/);
    // What to do next: retry it, with more credits.
    expect(show.stdout).toContain(`next:     \`harvester retry ${runId} --budget <credits>\` goes on from the checkpoint`);
  }, 60_000);

  it('retry: resumes from the checkpoint to completion, paying for no page twice', async () => {
    const result = await runCli(['retry', runId, '--budget', '1000'], env);
    expect(result.code).toBe(0);
    // The same run, its second attempt: no other id in sight.
    expect(result.stderr).toContain(`retrying ${runId} (attempt 2) with 1000 more credits`);
    expect(result.stdout).toMatch(new RegExp(`^run ${runId} of ${name}: completed$`, 'm'));
    expect(`${result.stdout}${result.stderr}`).not.toContain(`${runId}-retry`);
    const ledger = await emulator.ledger('sk_live_cli_runs');
    // Every video bought once: 150 units in all, across the run and its retry.
    expect(ledger.reduce((sum, row) => sum + row.units, 0)).toBe(150);
    expect(ledger.reduce((sum, row) => sum + row.credits, 0)).toBe(450);
    const items = await runCli(['query', 'SELECT count(*) AS n, count(DISTINCT item_id) AS d FROM items', '--format', 'json'], env);
    expect(JSON.parse(items.stdout)).toEqual([{ n: 150, d: 150 }]);
  }, 60_000);

  it('after the retry, runs, show, the warehouse and the report give the run one status: its latest attempt\'s', async () => {
    const runs = await runCli(['runs', '--name', name, '--json'], env);
    expect(runs.code).toBe(0);
    expect(JSON.parse(runs.stdout)).toEqual([expect.objectContaining({ workflowId: runId, harvest: name, status: 'completed', items: 150, credits: 450, budget: 1198, attempts: 2 })]);
    expect(JSON.parse((await runCli(['runs', '--name', name, '--status', 'budget_exhausted', '--json'], env)).stdout)).toEqual([]);
    expect(JSON.parse((await runCli(['runs', '--name', name, '--status', 'completed', '--json'], env)).stdout)).toEqual([expect.objectContaining({ workflowId: runId, status: 'completed' })]);
    const table = await runCli(['runs', '--name', name], env);
    expect(table.stdout.split('\n')[0]).toMatch(/^run +harvest +status +items +credits +started +ended +attempts$/);
    expect(table.stdout).toMatch(new RegExp(`^${runId} +${name} +completed +150 +450/1198 .* 2$`, 'm'));

    const show = await runCli(['show', runId, '--json'], env);
    expect(show.code).toBe(0);
    const shown = JSON.parse(show.stdout) as { runId: string; status: string; attempts: { attempt: number; status: string; credits: number; budget: number; temporalRunIds: string[] }[] };
    expect(shown).toMatchObject({
      runId,
      status: 'completed',
      attempts: [
        { attempt: 1, status: 'budget_exhausted', credits: 198, budget: 200 },
        { attempt: 2, status: 'completed', credits: 450, budget: 1198 },
      ],
    });
    expect(new Set(shown.attempts.flatMap((attempt) => attempt.temporalRunIds)).size).toBe(2);
    const text = await runCli(['show', runId], env);
    expect(text.stdout).toMatch(/^status: +completed$/m);
    expect(text.stdout).toMatch(/^attempts:\n {2}1\. budget_exhausted: started \S+, ended \S+, 198 of 200 credits \(Temporal run \S+\)\n {2}2\. completed: started \S+, ended \S+, 450 of 1198 credits \(Temporal run \S+\)$/m);

    const warehouse = await runCli(['query', 'SELECT run_id, status, credits_spent FROM harvest_runs', '--format', 'json'], env);
    expect(JSON.parse(warehouse.stdout)).toEqual([{ run_id: runId, status: 'completed', credits_spent: 450 }]);

    const out = join(dir, 'report.html');
    const report = await runCli(['report', '--out', out], env);
    expect(report.code, report.stderr).toBe(0);
    const html = readFileSync(out, 'utf8');
    // The run's bar names it with its status; it is no failure.
    expect(html).toMatch(new RegExp(`aria-label="run ${runId} of harvest [^"]+, completed, started `));
    expect(html).not.toContain(`<td class="id">${runId}</td>`);
  }, 90_000);

  it('replay: the run and a recorded history replay against the current code', async () => {
    // A run Temporal does not know is said so, with where it looked (not gRPC's `5 NOT_FOUND`).
    const unknown = await runCli(['replay', 'run-nope'], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toBe(`harvester: no run run-nope on Temporal at ${env.TEMPORAL_ADDRESS} (namespace default); \`harvester runs\` lists the runs there\n`);
    const live = await runCli(['replay', runId], env);
    expect(live.code).toBe(0);
    expect(live.stdout).toContain('replay cleanly');
    const recorded = await runCli(['replay', '--history', join(PROJECT_ROOT, 'test', 'workflows', 'histories', 'job-by-polling.json')], env);
    expect(recorded.code).toBe(0);
    expect(recorded.stdout).toContain('job-by-polling.json: 44 events replay cleanly');
  }, 60_000);

  it('runs: a run that continued as new shows when the run started, not its latest execution', async () => {
    const longName = `${name}-long`;
    const [one, two] = (await emulator.catalog()).instagram.handles;
    const harvest = harvestFrom(`harvests:
  - name: ${longName}
    budget: { credits: 100000 }
    concurrency: { targets: 1 }
    channels:
      - { platform: instagram, handle: ${one}, content: posts, max_items: 30 }
      - { platform: instagram, handle: ${two}, content: posts, max_items: 30 }
`);
    const api = new SocialApiClient({ baseUrl: emulator.baseUrl, apiKey: 'sk_live_cli_runs', prices });
    const worker = await startTestWorker(api);
    const temporal = await temporalClient();
    const workflowId = `${longName}-${Date.now()}`;
    try {
      // One target at a time, and a new execution once the history passes 10 events: the chain
      // continues as new between the two targets.
      await temporal.workflow.execute('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId, args: [{ harvest, pageSize: 10, historyLimit: 10 }] });
      const executions = await waitFor(async () => {
        const found: WorkflowExecutionInfo[] = [];
        for await (const execution of temporal.workflow.list({ query: `WorkflowId = '${workflowId}'` })) found.push(execution);
        return found.some((execution) => execution.status.name === 'COMPLETED') ? found : undefined;
      }, 20_000, 'the run to be listed as completed');
      const [first, ...later] = executions.sort((a, b) => a.startTime.getTime() - b.startTime.getTime());
      expect(later.length).toBeGreaterThanOrEqual(1);
      const runs = await runCli(['runs', '--name', longName, '--json'], env);
      expect(runs.code).toBe(0);
      const [listed] = JSON.parse(runs.stdout) as { workflowId: string; startedAt: string; attempts: number }[];
      expect(listed!.workflowId).toBe(workflowId);
      // Continuing as new is Temporal's business: still one attempt, whose executions `show` lists.
      expect(listed!.attempts).toBe(1);
      const show = JSON.parse((await runCli(['show', workflowId, '--json'], env)).stdout) as { attempts: { status: string; temporalRunIds: string[] }[] };
      expect(show.attempts).toEqual([expect.objectContaining({ status: 'completed', temporalRunIds: [first!.runId, ...later.map((execution) => execution.runId)] })]);
      const startedAt = Date.parse(listed!.startedAt);
      expect(startedAt).toBeGreaterThanOrEqual(first!.startTime.getTime());
      expect(startedAt).toBeLessThan(later[0]!.startTime.getTime());
    } finally {
      await worker.stop();
      await api.close();
      await temporal.connection.close();
    }
  }, 60_000);

  it('run and show: a target error gives its request id once', async () => {
    const missingName = `${name}-missing`;
    const config = join(mkdtempSync(join(tmpdir(), 'cli-missing-')), 'harvests.yaml');
    writeFileSync(config, `harvests:\n  - name: ${missingName}\n    budget: { credits: 100 }\n    channels:\n      - { platform: tiktok, handle: nobody_here_at_all, content: videos, max_items: 10 }\n`);
    const run = await runCli(['run', missingName, '--config', config], env);
    const runId = /^run (\S+) of /m.exec(run.stdout)![1]!;
    const show = await runCli(['show', runId], env);
    for (const output of [run.stdout, show.stdout]) {
      const errorLine = output.split('\n').find((line) => line.includes('handle_not_found'));
      expect(errorLine, output).toMatch(/NotFoundError: handle_not_found: .* \(request req_[0-9a-f]{32}\)$/);
      expect(errorLine!.match(/req_[0-9a-f]{32}/g), errorLine).toHaveLength(1);
    }
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
