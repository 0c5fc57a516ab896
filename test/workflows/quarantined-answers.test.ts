/**
 * Answers bought, checked and counted as landed must reach the lake, or the run must say they did
 * not (issue 38): text that is not well-formed Unicode is landed repaired, and an answer the load
 * still sets aside in quarantine/ makes its run `completed_with_errors`, which `retry` mends.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, describe, expect, inject, it } from 'vitest';
import type { Client } from '@temporalio/client';
import { IMPOSSIBLE_TIME, type Corruption, type ProxiedCall } from '../../src/emulator/corrupting-proxy.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { resumableState } from '../../src/harvest/checkpoint.js';
import { quarantinedLandingsOfRun } from '../../src/store/quarantine.js';
import { summaryText } from '../../src/cli/commands/run.js';
import { loadReportData } from '../../src/report/read-report.js';
import type { HarvestInput, HarvestSummary } from '../../workflows/harvest.js';
import { runCli } from '../support/cli.js';
import { channelWithStats as channelHarvest, ledgerCredits as ledgerOf, startCorruptedRig } from '../support/corrupted-rig.js';
import { executeHarvest, type TestWorker } from '../support/temporal.js';

const HARVEST_KEY = 'sk_live_quarantined_answers';
const VERIFY_KEY = 'sk_live_quarantined_answers_verify';
const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** A harvest rig whose worker reaches the emulator through a proxy that spoils the answers `choose` picks. */
function setup(choose: (call: ProxiedCall) => Corruption | undefined) {
  return startCorruptedRig({ harvest: HARVEST_KEY, verify: VERIFY_KEY }, choose, cleanups);
}

function execute(temporal: Client, worker: TestWorker, input: HarvestInput, id = `quarantine-${Math.random().toString(36).slice(2)}`): Promise<HarvestSummary> {
  return executeHarvest(temporal, { taskQueue: worker.taskQueue, workflowId: id, input });
}

const channelWithStats = (handle: string, maxItems: number) => channelHarvest('quarantined', handle, maxItems);

function ledgerCredits(rig: { emulator: { ledger(key: string): Promise<{ credits: number }[]> } }): Promise<number> {
  return ledgerOf(rig.emulator, HARVEST_KEY);
}

async function itemCounts(worker: TestWorker, handle: string) {
  const [row] = (
    await queryWarehouse(
      worker.dataDir,
      `SELECT count(*)::INTEGER AS items,
         (SELECT count(DISTINCT m.item_id)::INTEGER FROM item_metrics m JOIN items i USING (platform, item_id) WHERE i.author_handle = '${handle}' AND m.source_endpoint = 'tiktok/stats') AS with_stats
       FROM items WHERE author_handle = '${handle}'`,
    )
  ).rows;
  return { items: row!.items, withStats: row!.with_stats };
}

async function runRow(worker: TestWorker, runId: string) {
  return (await queryWarehouse(worker.dataDir, `SELECT status, answers_quarantined::INTEGER AS answers_quarantined, error FROM harvest_runs WHERE run_id = '${runId}'`)).rows[0];
}

describe('text the API sends that is not well-formed Unicode', () => {
  it('a NUL and a lone surrogate in a list page and in stats answers are landed repaired: every item and its stats are in the lake, each repair recorded', async () => {
    // The first list page's first caption, and the first two stats answers' author names.
    const rig = await setup((call) => {
      if (call.endpoint === 'tiktok/channel-videos' && call.endpointNumber === 1) return { kind: 'bad_text' };
      if (call.endpoint === 'tiktok/stats' && call.endpointNumber <= 2) return { kind: 'bad_text' };
      return undefined;
    });
    const handle = rig.catalog.tiktok.handles[1]!;
    const summary = await execute(rig.temporal, rig.worker, { harvest: channelWithStats(handle, 30) });
    expect(rig.proxy.spoiled.bad_text).toBe(3);
    expect(summary.landingsQuarantined).toEqual([]);
    expect(summary.status).toBe('completed');
    expect(await itemCounts(rig.worker, handle)).toEqual({ items: 30, withStats: 30 });
    expect(summary.creditsSpent).toBe(await ledgerCredits(rig));
    // The caption as the lake has it: each character that could not be kept is U+FFFD.
    const captions = (await queryWarehouse(rig.worker.dataDir, `SELECT caption FROM items WHERE author_handle = '${handle}' AND caption LIKE '%nul:%'`)).rows;
    expect(captions).toHaveLength(1);
    expect(String(captions[0]!.caption)).toContain('nul:\uFFFD surrogate:\uFFFD end');
    const repairs = (await queryWarehouse(rig.worker.dataDir, `SELECT endpoint, field_path, replaced, request_id FROM text_repairs WHERE run_id = '${summary.runId}' ORDER BY endpoint, request_id`)).rows;
    expect(repairs).toEqual([
      { endpoint: 'tiktok/channel-videos', field_path: 'data[0].caption', replaced: ['U+0000', 'U+D800'], request_id: expect.stringMatching(/^req_/) },
      { endpoint: 'tiktok/stats', field_path: 'data.author.name', replaced: ['U+0000', 'U+D800'], request_id: expect.stringMatching(/^req_/) },
      { endpoint: 'tiktok/stats', field_path: 'data.author.name', replaced: ['U+0000', 'U+D800'], request_id: expect.stringMatching(/^req_/) },
    ]);
    expect(await runRow(rig.worker, summary.runId)).toEqual({ status: 'completed', answers_quarantined: null, error: null });
  }, 180_000);
});

describe('an answer the load sets aside in quarantine', () => {
  it('makes its run completed_with_errors, saying how many and why everywhere; `retry` puts it back, and loads it once the cause is fixed', async () => {
    // One stats answer whose posted_at has a time's form and is none: the client takes it, DuckDB's reader refuses it.
    const rig = await setup((call) => (call.endpoint === 'tiktok/stats' && call.endpointNumber === 3 ? { kind: 'impossible_time' } : undefined));
    const handle = rig.catalog.tiktok.handles[2]!;
    const harvest = channelWithStats(handle, 20);
    const first = await execute(rig.temporal, rig.worker, { harvest });
    expect(rig.proxy.spoiled.impossible_time).toBe(1);
    expect(first.status).toBe('completed_with_errors');
    expect(first.targets[0]).toMatchObject({ status: 'done', items: 20 });
    expect(first.answersQuarantined).toEqual({ count: 1, reason: expect.stringMatching(/timestamp field value out of range: "2026-13-45T99:99:99Z"/) });
    expect(first.reason).toMatch(/^1 answer bought but not loaded, set aside in quarantine\/ \(.*timestamp field value out of range.*\); `harvester retry` loads it once the cause is fixed$/);
    expect(first.landingsQuarantined).toHaveLength(1);
    // The run's summary (the CLI's) says it in its first line.
    expect(summaryText(first, 1000).split('\n')[0]).toBe(`run ${first.runId} of quarantined: completed_with_errors (${first.reason})`);
    // The lake's record of the run says it too: its status, the count and the reason.
    expect(await runRow(rig.worker, first.runId)).toEqual({ status: 'completed_with_errors', answers_quarantined: 1, error: first.reason });
    expect(await itemCounts(rig.worker, handle)).toEqual({ items: 20, withStats: 19 });
    // `harvester show` says it in the run's status line.
    const show = await runCli(['show', first.runId], { TEMPORAL_ADDRESS: inject('temporalAddress'), HARVESTER_DATA_DIR: rig.worker.dataDir, LOG_LEVEL: 'error' });
    expect(show.stdout).toContain(`status:   completed_with_errors (${first.reason})\n`);
    // And so does the report, among the runs that ended short.
    expect((await loadReportData(rig.worker.dataDir)).failures).toEqual([expect.objectContaining({ runId: first.runId, status: 'completed_with_errors', error: first.reason })]);
    const [line] = quarantinedLandingsOfRun(rig.worker.dataDir, first.runId);
    const file = line!.slice(0, line!.indexOf(': '));

    // Retried before the cause is fixed: the answer is put back, refused again, and the run says so again.
    const again = await execute(rig.temporal, rig.worker, { harvest, resume: resumableState(first.checkpoint, 1_000) }, `${first.runId}-again`);
    expect(again.status).toBe('completed_with_errors');
    expect(again.answersQuarantined).toMatchObject({ count: 1 });
    expect(quarantinedLandingsOfRun(rig.worker.dataDir, first.runId)).toHaveLength(1);

    // The cause fixed (as a user fixes an answer the load names, or a version that reads it comes):
    // the retry loads it, buys nothing again, and the run is complete everywhere.
    writeFileSync(file, readFileSync(file, 'utf8').replace(IMPOSSIBLE_TIME, '2026-11-01T00:00:00Z'));
    const retried = await execute(rig.temporal, rig.worker, { harvest, resume: resumableState(again.checkpoint, 1_000) }, `${first.runId}-retry`);
    expect(retried.status).toBe('completed');
    expect(retried.answersQuarantined).toBeUndefined();
    expect(retried.reason).toBeUndefined();
    expect(retried.landingsQuarantined).toEqual([]);
    expect(quarantinedLandingsOfRun(rig.worker.dataDir, first.runId)).toEqual([]);
    expect(await itemCounts(rig.worker, handle)).toEqual({ items: 20, withStats: 20 });
    expect(await runRow(rig.worker, first.runId)).toEqual({ status: 'completed', answers_quarantined: null, error: null });
    expect((await loadReportData(rig.worker.dataDir)).failures).toEqual([]);
    expect(retried.creditsSpent).toBe(first.creditsSpent);
    expect(retried.creditsSpent).toBe(await ledgerCredits(rig));
  }, 240_000);
});
