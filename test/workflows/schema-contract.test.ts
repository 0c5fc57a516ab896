/**
 * A harvest's schema contract (issue 42): what a run's loads do with a field the API starts to send
 * beyond its resource's schema. `freeze` sets the answers aside in quarantine/, naming the field, and
 * the run says so (completed_with_errors); a retry under `evolve` loads them without buying them
 * again. `discard` loads the answers without the field. Each records the field in `schema_drift`.
 * (`evolve`, the default, is test/warehouse/schema-drift.test.ts's.)
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { resumableState } from '../../src/harvest/checkpoint.js';
import { quarantinedLandingsOfRun } from '../../src/store/quarantine.js';
import type { HarvestInput, HarvestSummary } from '../../workflows/harvest.js';
import { startHarvestRig, type HarvestRig } from '../support/harvest-rig.js';
import { ledgerCredits } from '../support/corrupted-rig.js';
import { executeHarvest, harvestFrom, startTestWorker, type TestWorker } from '../support/temporal.js';

const HARVEST_KEY = 'sk_live_schema_contract';
const VERIFY_KEY = 'sk_live_schema_contract_verify';
const SPONSOR = { sponsor: { name: 'Acme' } };

let rig: HarvestRig;
let worker: TestWorker;
beforeAll(async () => {
  rig = await startHarvestRig({ harvest: HARVEST_KEY, verify: VERIFY_KEY });
  worker = await startTestWorker(rig.api);
  // The API starts sending a field its stats resource does not have.
  await rig.emulator.admin('faults', { extra_fields: { 'tiktok/stats': SPONSOR } });
}, 120_000);
afterAll(async () => {
  await worker?.stop();
  await rig?.close();
});

/** A harvest of one TikTok channel's first `maxItems` videos with their stats, under `contract` (a line of YAML). */
const harvestUnder = (name: string, handle: string, maxItems: number, contract: string) =>
  harvestFrom(`
harvests:
  - name: ${name}
    budget: { credits: 100000 }
    channels:
      - { platform: tiktok, handle: ${handle}, content: videos, max_items: ${maxItems} }
    enrich: { stats: true }
    schema_contract: ${contract}
`);

function execute(input: HarvestInput, id = `contract-${Math.random().toString(36).slice(2)}`): Promise<HarvestSummary> {
  return executeHarvest(rig.temporal, { taskQueue: worker.taskQueue, workflowId: id, input });
}

const rows = async (sql: string) => (await queryWarehouse(worker.dataDir, sql)).rows;
const driftOf = (runId: string) => rows(`SELECT field_path, contract, answers::INTEGER AS answers FROM schema_drift WHERE run_id = '${runId}' AND endpoint = 'tiktok/stats' ORDER BY contract, field_path`);
const statsOf = (handle: string) =>
  rows(`SELECT count(*)::INTEGER AS stats FROM item_metrics m JOIN items i USING (platform, item_id) WHERE i.author_handle = '${handle}' AND m.source_endpoint = 'tiktok/stats'`);
const sponsoredAnswers = (runId: string) =>
  rows(`SELECT count(*)::INTEGER AS answers FROM raw_answers WHERE run_id = '${runId}' AND endpoint = 'tiktok/stats' AND json_extract_string(answer, '$.data.sponsor.name') = 'Acme'`);

describe('a harvest\'s schema contract', () => {
  it('freeze: the answers with the new field are set aside naming it, the run says so, and a retry under evolve loads them, buying nothing again', async () => {
    const handle = rig.catalog.tiktok.handles[3]!;
    const frozen = harvestUnder('contract-freeze', handle, 5, '{ default: evolve, stats: freeze }');
    expect(frozen.schema_contract).toEqual({ default: 'evolve', resources: { stats: 'freeze' } });
    const first = await execute({ harvest: frozen });
    expect(first.status).toBe('completed_with_errors');
    expect(first.targets[0]).toMatchObject({ status: 'done', items: 5 });
    expect(first.answersQuarantined).toEqual({
      count: 5,
      reason: 'schema contract freeze: this tiktok/stats answer carries data.sponsor, data.sponsor.name, which the resource\'s schema lacks (data.sponsor = {"name":"Acme"})',
    });
    expect(first.reason).toMatch(/^5 answers bought but not loaded, set aside in quarantine\/ \(the first: schema contract freeze: .*data\.sponsor.*\); `harvester retry` loads them once the cause is fixed$/);
    // The lake's record of the run says it, and holds none of the frozen answers (the lists loaded).
    expect(await rows(`SELECT status, answers_quarantined::INTEGER AS quarantined FROM harvest_runs WHERE run_id = '${first.runId}'`)).toEqual([{ status: 'completed_with_errors', quarantined: 5 }]);
    expect(await statsOf(handle)).toEqual([{ stats: 0 }]);
    expect(await sponsoredAnswers(first.runId)).toEqual([{ answers: 0 }]);
    // Recorded: every answer compared under freeze.
    expect(await driftOf(first.runId)).toEqual([
      { field_path: 'data.sponsor', contract: 'freeze', answers: 5 },
      { field_path: 'data.sponsor.name', contract: 'freeze', answers: 5 },
    ]);
    // Not lost: each answer is on disk in quarantine/, with its reason.
    const quarantined = quarantinedLandingsOfRun(worker.dataDir, first.runId);
    expect(quarantined).toHaveLength(5);
    for (const line of quarantined) expect(existsSync(line.slice(0, line.indexOf(': ')))).toBe(true);

    // The contract switched to evolve (as `harvester retry --schema-contract evolve` does): the retry loads them.
    const evolving = { ...frozen, schema_contract: { default: 'evolve' as const } };
    const retried = await execute({ harvest: evolving, resume: resumableState(first.checkpoint, 1_000) }, `${first.runId}-retry`);
    expect(retried.status).toBe('completed');
    expect(retried.answersQuarantined).toBeUndefined();
    expect(quarantinedLandingsOfRun(worker.dataDir, first.runId)).toEqual([]);
    expect(await statsOf(handle)).toEqual([{ stats: 5 }]);
    expect(await sponsoredAnswers(first.runId)).toEqual([{ answers: 5 }]);
    expect(await rows(`SELECT status FROM harvest_runs WHERE run_id = '${first.runId}'`)).toEqual([{ status: 'completed' }]);
    expect((await driftOf(first.runId)).filter((row) => row.contract === 'evolve')).toEqual([
      { field_path: 'data.sponsor', contract: 'evolve', answers: 5 },
      { field_path: 'data.sponsor.name', contract: 'evolve', answers: 5 },
    ]);
    expect(retried.creditsSpent).toBe(first.creditsSpent);
    expect(retried.creditsSpent).toBe(await ledgerCredits(rig.emulator, HARVEST_KEY));
  }, 240_000);

  it('discard: the answers load without the new field, and the field is recorded as discarded', async () => {
    const handle = rig.catalog.tiktok.handles[4]!;
    const spentBefore = await ledgerCredits(rig.emulator, HARVEST_KEY);
    const summary = await execute({ harvest: harvestUnder('contract-discard', handle, 5, 'discard') });
    expect(summary.status).toBe('completed');
    expect(summary.landingsQuarantined).toEqual([]);
    expect(await statsOf(handle)).toEqual([{ stats: 5 }]);
    // Dropped from what was loaded, the raw answers too; the rest of each answer is kept.
    expect(await sponsoredAnswers(summary.runId)).toEqual([{ answers: 0 }]);
    expect(await rows(`SELECT count(*)::INTEGER AS answers FROM raw_answers WHERE run_id = '${summary.runId}' AND endpoint = 'tiktok/stats' AND json_extract_string(answer, '$.data.metrics.views') IS NOT NULL AND json_extract(answer, '$.data.sponsor') IS NULL`)).toEqual([{ answers: 5 }]);
    expect(await driftOf(summary.runId)).toEqual([
      { field_path: 'data.sponsor', contract: 'discard', answers: 5 },
      { field_path: 'data.sponsor.name', contract: 'discard', answers: 5 },
    ]);
    expect(summary.schemaDrift?.map(({ field, contract }) => ({ field, contract }))).toEqual([
      { field: 'data.sponsor', contract: 'discard' },
      { field: 'data.sponsor.name', contract: 'discard' },
    ]);
    expect(summary.creditsSpent).toBe((await ledgerCredits(rig.emulator, HARVEST_KEY)) - spentBefore);
  }, 240_000);
});
