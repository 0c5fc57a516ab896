/**
 * A run's start on a data directory that has a lake (every daily run after the first): its
 * knowledge of the items it has seen and its forecast read the lake at the API's time, which is
 * asked of the API once for both (activities/run-forecast.ts's apiTimeOnce), not once each, and
 * while the lake is read. On the real stack: the emulator in this process, Temporal, a worker.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startHarvestRig, type HarvestRig } from '../support/harvest-rig.js';
import { watchServedRequests, type ServedRequests } from '../support/served-requests.js';
import { executeHarvest, harvestFrom, startTestWorker } from '../support/temporal.js';

const HARVEST_KEY = 'sk_live_prepare_run';
const VERIFY_KEY = 'sk_live_prepare_run_verify';

let rig: HarvestRig;
let timeAsked: ServedRequests;
beforeAll(async () => {
  rig = await startHarvestRig({ harvest: HARVEST_KEY, verify: VERIFY_KEY }, { credits: 10_000_000 });
  // The API's time is the Date header of a free call, GET /v1/webhooks (src/api/client.ts's serverTime).
  timeAsked = watchServedRequests('/v1/webhooks');
});
afterAll(async () => {
  timeAsked?.stop();
  await rig?.close();
});

it("a run on a data directory with a lake asks the API's time once, for its knowledge and its forecast both", async () => {
  const harvest = harvestFrom(`harvests:
  - name: prepare-run
    budget: { credits: 100000 }
    channels:
      - { platform: tiktok, handle: ${rig.catalog.tiktok.handles[0]}, content: videos, max_items: 20 }
`);
  const worker = await startTestWorker(rig.api);
  try {
    const first = await executeHarvest(rig.temporal, { taskQueue: worker.taskQueue, workflowId: `prepare-run-1-${Date.now()}`, input: { harvest } });
    expect(first.status).toBe('completed');
    // The first run had no lake to read at its start: neither knowledge nor a forecast from history.
    expect(timeAsked.byStatus.get(200) ?? 0).toBe(0);
    await rig.emulator.admin('clock', { advance_seconds: 3600 });
    timeAsked.reset();
    const second = await executeHarvest(rig.temporal, { taskQueue: worker.taskQueue, workflowId: `prepare-run-2-${Date.now()}`, input: { harvest } });
    expect(second.status).toBe('completed');
    // It knew the items the first run listed (it stopped at them), and forecast from the lake's history.
    expect(second.forecast?.fromHistory ?? 0).toBeGreaterThan(0);
    expect(timeAsked.byStatus.get(200) ?? 0).toBe(1);
  } finally {
    await worker.stop();
  }
});
