/**
 * A run carries the API it was started for; a worker set up for another API (another base URL, or
 * the same with another key) refuses the run's tasks, and the run ends failed saying so, with
 * nothing bought. Real Temporal, the emulator over HTTP, the built CLI.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { WorkflowFailedError } from '@temporalio/client';
import { apiIdentity } from '../../src/api/identity.js';
import { resumableState } from '../../src/harvest/checkpoint.js';
import type { HarvestInput, HarvestSummary } from '../../workflows/harvest.js';
import { runCli } from '../support/cli.js';
import { startHarvestRig, type HarvestRig } from '../support/harvest-rig.js';
import { executeHarvest, harvestFrom, startTestWorker } from '../support/temporal.js';

const HARVEST_KEY = 'sk_live_wrong_api_harvest';
const VERIFY_KEY = 'sk_live_wrong_api_verify';
/** Nothing listens on port 9 of loopback (discard): the API a misconfigured run was started for. */
const UNREACHABLE = 'http://127.0.0.1:9';
let rig: HarvestRig;

beforeAll(async () => {
  rig = await startHarvestRig({ harvest: HARVEST_KEY, verify: VERIFY_KEY });
});
afterAll(async () => {
  await rig.close();
});

function harvest(name: string, handle: string, maxItems = 40) {
  return harvestFrom(`
harvests:
  - name: ${name}
    budget: { credits: 10000 }
    channels:
      - { platform: tiktok, handle: ${handle}, content: videos, max_items: ${maxItems} }
`);
}

async function spentByHarvestKey(): Promise<number> {
  return (await rig.emulator.ledger(HARVEST_KEY)).reduce((sum, row) => sum + row.credits, 0);
}

describe('a worker set up for another API', () => {
  it('refuses a run started for another base URL: the run fails at its start, naming both base URLs and never the key', async () => {
    const worker = await startTestWorker(rig.api);
    try {
      const before = await spentByHarvestKey();
      const input: HarvestInput = { harvest: harvest('elsewhere', rig.catalog.tiktok.handles[1]!), api: apiIdentity({ baseUrl: UNREACHABLE, apiKey: 'sk_live_some_other_key' }) };
      const failure = await rig.temporal.workflow
        .execute('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId: `wrong-api-${Date.now()}`, args: [input] })
        .then(() => undefined, (error: unknown) => error);
      expect(failure).toBeInstanceOf(WorkflowFailedError);
      const message = (failure as WorkflowFailedError).cause?.message ?? '';
      expect(message).toMatch(/^the run could not start: a worker set up for another API took the run's task: /);
      expect(message).toContain(`was started for the API at ${UNREACHABLE}/v1,`);
      expect(message).toContain(`calls ${rig.emulator.baseUrl}`);
      expect(message).not.toContain('sk_live_');
      expect(await spentByHarvestKey()).toBe(before);
    } finally {
      await worker.stop();
    }
  });

  it('refuses the listing of a run resumed from its checkpoint, with the same base URL and another key: the run ends failed saying the key differs, once', async () => {
    const worker = await startTestWorker(rig.api);
    try {
      const handle = rig.catalog.tiktok.handles[2]!;
      const own = rig.api.identity;
      // A run this worker may do, stopped short by its budget…
      const first = (await rig.temporal.workflow.execute('harvestWorkflow', {
        taskQueue: worker.taskQueue,
        workflowId: `right-api-${Date.now()}`,
        args: [{ harvest: harvest('resumed', handle, 100), budgetCredits: 60, api: own } satisfies HarvestInput],
      })) as HarvestSummary;
      expect(first.status).toBe('budget_exhausted');
      const before = await spentByHarvestKey();
      // …retried as if from a machine whose key is another: the listing's task is refused.
      const other = apiIdentity({ baseUrl: rig.emulator.baseUrl, apiKey: VERIFY_KEY });
      const retried = await executeHarvest(rig.temporal, {
        taskQueue: worker.taskQueue,
        workflowId: `wrong-key-${Date.now()}`,
        input: { harvest: harvest('resumed', handle, 100), api: other, resume: resumableState(first.checkpoint, 1000) },
      });
      expect(retried.status).toBe('failed');
      // The same API with another key: the key is what differs, and said so, not the task queues.
      expect(retried.reason).toMatch(/^the run's API key is not the one the worker uses: /);
      expect(retried.reason).toContain(`was started with a SOCIAL_API_KEY whose fingerprint is ${other.keyFingerprint}`);
      expect(retried.reason).toContain(`calls ${rig.emulator.baseUrl} with the key whose fingerprint is ${own.keyFingerprint}`);
      expect(retried.reason).not.toContain('task queues');
      // Said once, though the final load was refused too.
      expect(retried.reason!.match(/not the one the worker uses/g)).toHaveLength(1);
      // Refused before it bought anything: no credits counted for it.
      expect(retried.targets[0]).toMatchObject({ status: 'failed', credits: first.targets[0]!.credits, error: { type: 'WrongApiKey' } });
      expect(retried.creditsSpent).toBe(first.creditsSpent);
      expect(retried.reason).not.toContain(VERIFY_KEY);
      expect(await spentByHarvestKey()).toBe(before);
    } finally {
      await worker.stop();
    }
  });

  it('harvester run for an unreachable API, with a worker for the emulator on its task queue: the run fails saying so, instead of completing on the other API', async () => {
    const worker = await startTestWorker(rig.api);
    try {
      const dir = mkdtempSync(join(tmpdir(), 'wrong-api-cli-'));
      const config = join(dir, 'harvests.yaml');
      writeFileSync(config, `harvests:\n  - name: misdirected\n    budget: { credits: 1000 }\n    channels:\n      - { platform: tiktok, handle: ${rig.catalog.tiktok.handles[3]!}, content: videos, max_items: 20 }\n`);
      const before = await spentByHarvestKey();
      const result = await runCli(['run', 'misdirected', '--config', config, '--no-local-worker'], {
        TEMPORAL_ADDRESS: inject('temporalAddress'),
        HARVESTER_TASK_QUEUE: worker.taskQueue,
        HARVESTER_DATA_DIR: join(dir, 'data'),
        SOCIAL_API_BASE_URL: UNREACHABLE,
        SOCIAL_API_KEY: 'sk_live_not_the_emulators',
        LOG_LEVEL: 'error',
      });
      expect(result.code).toBe(1);
      expect(result.stdout).toBe('');
      expect(result.stderr).toMatch(/harvester: run run-misdirected-\S+ failed: the run could not start: a worker set up for another API took the run's task: /);
      expect(result.stderr).toContain(`was started for the API at ${UNREACHABLE}/v1, and a worker on task queue "${worker.taskQueue}" calls ${rig.emulator.baseUrl}`);
      expect(result.stderr).not.toContain('sk_live_');
      expect(await spentByHarvestKey()).toBe(before);
    } finally {
      await worker.stop();
    }
  }, 60_000);

  it('harvester run --no-local-worker with a mistyped SOCIAL_API_KEY: the run fails saying its key is not the workers\', never the key, not blaming task queues', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wrong-key-cli-'));
    const worker = await startTestWorker(rig.api, { dataDir: join(dir, 'data') });
    try {
      const config = join(dir, 'harvests.yaml');
      writeFileSync(config, `harvests:\n  - name: mistyped\n    budget: { credits: 1000 }\n    channels:\n      - { platform: tiktok, handle: ${rig.catalog.tiktok.handles[4]!}, content: videos, max_items: 20 }\n`);
      const mistyped = `${HARVEST_KEY}x`;
      const before = await spentByHarvestKey();
      const result = await runCli(['run', 'mistyped', '--config', config, '--no-local-worker'], {
        TEMPORAL_ADDRESS: inject('temporalAddress'),
        HARVESTER_TASK_QUEUE: worker.taskQueue,
        // The worker's own directory: only the key differs.
        HARVESTER_DATA_DIR: worker.dataDir,
        SOCIAL_API_BASE_URL: rig.emulator.baseUrl,
        SOCIAL_API_KEY: mistyped,
        LOG_LEVEL: 'error',
      });
      expect(result.code).toBe(1);
      expect(result.stdout).toBe('');
      expect(result.stderr).toMatch(/harvester: run run-mistyped-\S+ failed: the run could not start: the run's API key is not the one the worker uses: /);
      expect(result.stderr).toContain(
        `was started with a SOCIAL_API_KEY whose fingerprint is ${apiIdentity({ baseUrl: rig.emulator.baseUrl, apiKey: mistyped }).keyFingerprint}, and a worker on task queue "${worker.taskQueue}" calls ${rig.emulator.baseUrl} with the key whose fingerprint is ${rig.api.identity.keyFingerprint}, so it refused the task; check the SOCIAL_API_KEY the run was started with`,
      );
      expect(result.stderr).not.toMatch(/another API|different task queues/);
      expect(result.stderr).not.toContain('sk_live_');
      expect(await spentByHarvestKey()).toBe(before);
    } finally {
      await worker.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
