/**
 * What the Temporal UI shows of a run tells its outcome apart: each of the five statuses (and a
 * run that could not start) is read back the way the UI reads it, through the Temporal client: the
 * workflow's user metadata (its summary, and its current details from the
 * `__temporal_workflow_metadata` query), and its HarvestStatus search attribute (a column of the
 * UI's list). `harvester runs` and `harvester show` say the same. Runs are started by the real CLI
 * (`run --no-local-worker`) and worked by real workers against the emulator over HTTP.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Client } from '@temporalio/client';
import type { SocialApiClient } from '../../src/api/client.js';
import { TEMPORAL_BINARY } from '../../src/temporal/dev-server.js';
import { clientFor } from '../support/client.js';
import { runCli } from '../support/cli.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { startTestWorker, temporalClient, type TestWorker } from '../support/temporal.js';

const KEY = 'sk_live_ui_status';
const BROKE_KEY = 'sk_live_ui_status_broke';
const suffix = Date.now().toString(36);

let emulator: TestEmulator;
let temporal: Client;
let apis: SocialApiClient[];
let workers: TestWorker[];
let configFile: string;
let dir: string;
let env: Record<string, string>;

/** A harvest of the config, the worker's task queue it runs on, and how it should end. */
interface Case {
  harvest: string;
  queue: () => string;
  status: string;
  exitCode: number;
}
let cases: Case[];

beforeAll(async () => {
  emulator = await startTestEmulator({ apiKeys: [KEY, BROKE_KEY] });
  await emulator.admin('keys', { api_key: BROKE_KEY, credits: 100 });
  temporal = await temporalClient();
  const catalog = await emulator.catalog();
  dir = mkdtempSync(join(tmpdir(), 'ui-status-'));
  apis = [clientFor(emulator, { apiKey: KEY }), clientFor(emulator, { apiKey: BROKE_KEY }), clientFor(emulator, { apiKey: KEY })];
  // A file where the third worker's data directory should be: every write is refused, so a run it takes cannot start.
  const notADirectory = join(dir, 'not-a-directory');
  writeFileSync(notADirectory, '');
  workers = await Promise.all([startTestWorker(apis[0]!), startTestWorker(apis[1]!), startTestWorker(apis[2]!, { dataDir: join(notADirectory, 'data') })]);
  const [handle, other, third] = catalog.tiktok.handles.slice(8, 11);
  configFile = join(dir, 'harvests.yaml');
  writeFileSync(
    configFile,
    `harvests:
  - name: ui-completed-${suffix}
    budget: { credits: 10000 }
    channels:
      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 20 }
  - name: ui-with-errors-${suffix}
    budget: { credits: 10000 }
    channels:
      - { platform: tiktok, handle: ${other}, content: videos, max_items: 20 }
      - { platform: tiktok, handle: nobody_here_at_all, content: videos, max_items: 10 }
  - name: ui-budget-${suffix}
    budget: { credits: 100 }
    channels:
      - { platform: tiktok, handle: ${third}, content: videos, max_items: 150 }
  - name: ui-paused-${suffix}
    budget: { credits: 100000 }
    channels:
      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 200 }
  - name: ui-failed-${suffix}
    budget: { credits: 1000 }
    channels:
      - { platform: tiktok, handle: nobody_here_at_all, content: videos, max_items: 10 }
  - name: ui-not-started-${suffix}
    budget: { credits: 1000 }
    channels:
      - { platform: tiktok, handle: ${handle}, content: videos, max_items: 10 }
`,
  );
  env = { TEMPORAL_ADDRESS: inject('temporalAddress'), HARVESTER_DATA_DIR: join(dir, 'data'), LOG_LEVEL: 'error' };
  cases = [
    { harvest: `ui-completed-${suffix}`, queue: () => workers[0]!.taskQueue, status: 'completed', exitCode: 0 },
    { harvest: `ui-with-errors-${suffix}`, queue: () => workers[0]!.taskQueue, status: 'completed_with_errors', exitCode: 3 },
    { harvest: `ui-budget-${suffix}`, queue: () => workers[0]!.taskQueue, status: 'budget_exhausted', exitCode: 4 },
    // A key with 100 credits: the API answers 402 and the run pauses.
    { harvest: `ui-paused-${suffix}`, queue: () => workers[1]!.taskQueue, status: 'paused', exitCode: 5 },
    { harvest: `ui-failed-${suffix}`, queue: () => workers[0]!.taskQueue, status: 'failed', exitCode: 6 },
    // The workflow itself fails: Temporal's status is Failed, and the run says so too.
    { harvest: `ui-not-started-${suffix}`, queue: () => workers[2]!.taskQueue, status: 'failed', exitCode: 1 },
  ];
}, 60_000);

afterAll(async () => {
  await Promise.all((workers ?? []).map((worker) => worker.stop()));
  await Promise.all((apis ?? []).map((api) => api.close()));
  await temporal?.connection.close();
  await emulator?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/**
 * The data directory a run on `queue` is started for: its worker's, since a worker serves only runs
 * of its own; for the worker whose directory cannot be written, a directory it does not keep.
 */
function dataDirOf(queue: string): string {
  const worker = workers.find((candidate) => candidate.taskQueue === queue)!;
  return worker === workers[2] ? env.HARVESTER_DATA_DIR! : worker.dataDir;
}

/** The workflow ids the Temporal CLI lists for a visibility query (as `temporal workflow list --query` shows them). */
function listedIds(query: string): string[] {
  const output = execFileSync(TEMPORAL_BINARY, ['workflow', 'list', '--address', inject('temporalAddress'), '--query', query, '--output', 'json'], { encoding: 'utf8' });
  return output.trim() === '' ? [] : (JSON.parse(output) as { execution: { workflowId: string } }[]).map((execution) => execution.execution.workflowId);
}

interface WorkflowMetadata {
  definition?: { type?: string };
  currentDetails?: string;
}

describe('the Temporal UI tells the five outcomes apart, and the CLI agrees', () => {
  it('each run shows its status in its current details, summary and HarvestStatus, as `runs` and `show` do', async () => {
    const results = await Promise.all(
      cases.map((entry) => runCli(['run', entry.harvest, '--config', configFile, '--no-local-worker', '--json'], { ...env, HARVESTER_TASK_QUEUE: entry.queue(), HARVESTER_DATA_DIR: dataDirOf(entry.queue()) })),
    );
    for (const [index, entry] of cases.entries()) {
      const result = results[index]!;
      expect(result.code, `${entry.harvest}: ${result.stderr} ${result.stdout}`).toBe(entry.exitCode);
      const runId = /^started (\S+)$/m.exec(result.stderr)![1]!;
      const handle = temporal.workflow.getHandle(runId);
      const description = await handle.describe();
      // The list view: the summary the run was started with, and the HarvestStatus column.
      expect(await description.staticSummary()).toMatch(new RegExp(`^${entry.harvest}: budget \\d+ credits$`));
      expect(description.searchAttributes.HarvestName).toEqual([entry.harvest]);
      // The detail view: the run's status line, as the UI reads it (a worker answers the query).
      const metadata = await handle.query<WorkflowMetadata>('__temporal_workflow_metadata');
      expect(metadata.definition?.type).toBe('harvestWorkflow');
      expect(metadata.currentDetails, entry.harvest).toMatch(new RegExp(`^${entry.status}: `));
      const runs = await runCli(['runs', '--name', entry.harvest, '--json'], env);
      expect(JSON.parse(runs.stdout), entry.harvest).toEqual([expect.objectContaining({ workflowId: runId, status: entry.status, attempts: 1 })]);
      const filtered = await runCli(['runs', '--name', entry.harvest, '--status', entry.status, '--json'], env);
      expect(JSON.parse(filtered.stdout), entry.harvest).toEqual([expect.objectContaining({ workflowId: runId })]);
      if (entry.exitCode === 1) {
        expect(description.status.name).toBe('FAILED');
        expect(listedIds(`HarvestName = '${entry.harvest}' AND ExecutionStatus = 'Failed'`)).toEqual([runId]);
        expect(metadata.currentDetails).toMatch(/^failed: the run could not start: the data directory cannot be written/);
        continue;
      }
      // Temporal's own status: a harvest that failed is a failed execution (the UI's Failures filter), the others completed.
      expect(description.status.name).toBe(entry.status === 'failed' ? 'FAILED' : 'COMPLETED');
      expect(description.searchAttributes.HarvestStatus).toEqual([entry.status]);
      // The list tells the five apart, by Temporal's status and the HarvestStatus search attribute, as the Temporal CLI lists them.
      const executionStatus = entry.status === 'failed' ? 'Failed' : 'Completed';
      expect(listedIds(`HarvestName = '${entry.harvest}' AND ExecutionStatus = '${executionStatus}' AND HarvestStatus = '${entry.status}'`), entry.harvest).toEqual([runId]);
      expect(listedIds(`HarvestName = '${entry.harvest}' AND ExecutionStatus != '${executionStatus}'`), entry.harvest).toEqual([]);
      const summary = JSON.parse(result.stdout) as { status: string; itemsLanded: number; pagesLanded: number; creditsSpent: number; budget: number };
      expect(summary.status).toBe(entry.status);
      expect(metadata.currentDetails).toContain(`${entry.status}: ${summary.itemsLanded} items in ${summary.pagesLanded} pages, ${summary.creditsSpent} of ${summary.budget} credits`);
      const show = await runCli(['show', runId, '--json'], env);
      expect(JSON.parse(show.stdout)).toMatchObject({ runId, status: entry.status, attempts: [{ attempt: 1, status: entry.status }] });
      if (entry.status === 'failed') {
        // A failed run's checkpoint is in its failure: `retry` resumes from it (and fails again, the target still missing).
        const retried = await runCli(['retry', runId, '--no-local-worker', '--json'], { ...env, HARVESTER_TASK_QUEUE: entry.queue() });
        expect(retried.stderr).toContain(`retrying ${runId} (attempt 2)`);
        expect(retried.code, retried.stderr).toBe(entry.exitCode);
        expect(JSON.parse(retried.stdout)).toMatchObject({ runId, status: 'failed' });
      }
    }
  }, 120_000);
});
