#!/usr/bin/env node
/**
 * Records harvest workflow histories for the replay tests (test/workflows/replay.test.ts): real
 * runs against the emulator on a throwaway Temporal dev server, each history saved as JSON under
 * test/workflows/histories/. Re-record after an intended change to the workflow's commands:
 *
 *   npm run build && node scripts/record-workflow-histories.mjs
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { execFileSync } from 'node:child_process';

const dist = new URL('../dist/', import.meta.url).pathname;
const { startEmulator } = await import(join(dist, 'src/emulator/server.js'));
const { SocialApiClient } = await import(join(dist, 'src/api/client.js'));
const { loadPriceTable } = await import(join(dist, 'src/config/prices.js'));
const { parseHarvestConfig } = await import(join(dist, 'src/config/harvest-config.js'));
const { createHarvestWorker } = await import(join(dist, 'src/temporal/worker.js'));
const { TEMPORAL_BINARY, ephemeralServerOptions } = await import(join(dist, 'src/temporal/dev-server.js'));
const { freePort } = await import(join(dist, 'src/cli/free-port.js'));
const { harvestSummary } = await import(join(dist, 'src/temporal/run-summary.js'));

Runtime.install({ logger: new DefaultLogger('WARN') });
const out = new URL('../test/workflows/histories/', import.meta.url).pathname;
const emulator = await startEmulator({ port: 0, seed: 42, jobStepMs: 50 });
const port = await freePort();
const env = await TestWorkflowEnvironment.createLocal({ server: ephemeralServerOptions(port) });
const api = new SocialApiClient({ baseUrl: emulator.baseUrl, apiKey: emulator.apiKeys[0], prices: loadPriceTable() });
const catalog = (await (await fetch(`${emulator.origin}/_emulator/catalog`)).json()).data;
const harvests = parseHarvestConfig(
  `
harvests:
  - name: paged-and-enriched
    budget: { credits: 100000 }
    channels:
      - { platform: tiktok, handle: ${catalog.tiktok.handles[0]}, content: videos, max_items: 60 }
    searches:
      - { platform: instagram, query: yoga, max_results: 30 }
    enrich: { stats: true, transcript: true, download: true, comments: { max_per_item: 3 } }
  - name: job-by-polling
    budget: { credits: 100000 }
    job_threshold: 100
    channels:
      - { platform: instagram, handle: ${catalog.instagram.handles[0]}, content: posts, max_items: 150 }
  - name: budget-exhausted
    budget: { credits: 200 }
    channels:
      - { platform: tiktok, handle: ${catalog.tiktok.handles[1]}, content: videos, max_items: 300 }
  - name: not-found
    budget: { credits: 1000 }
    comments:
      - { url: "https://www.tiktok.com/@${catalog.tiktok.handles[0]}/video/7000000000000999999", max_items: 10 }
`,
  'recorded.yaml',
).harvests;
const taskQueue = 'record-histories';
const worker = await createHarvestWorker({ connection: env.nativeConnection, namespace: 'default', taskQueue, deps: { client: api, dataDir: mkdtempSync(join(tmpdir(), 'record-')) } });
await worker.runUntil(async () => {
  for (const harvest of harvests) {
    const handle = await env.client.workflow.start('harvestWorkflow', { taskQueue, workflowId: `recorded-${harvest.name}`, args: [{ harvest, pageSize: 20 }] });
    // A harvest that ends failed fails its workflow, its summary in the failure's details.
    const summary = await harvestSummary(handle);
    // The Temporal CLI writes the history JSON that historyFromJSON reads back.
    const json = execFileSync(TEMPORAL_BINARY, ['workflow', 'show', '--workflow-id', handle.workflowId, '--address', `127.0.0.1:${port}`, '--output', 'json'], { maxBuffer: 64 << 20 });
    // not-found.json stays as recorded before a failed harvest failed its workflow: the patch's old path.
    writeFileSync(join(out, `${harvest.name === 'not-found' ? 'not-found-failed-workflow' : harvest.name}.json`), json);
    console.log(`${harvest.name}: ${summary.status}, ${JSON.parse(json).events.length} events`);
  }
});
await api.close();
await env.teardown();
await emulator.close();
