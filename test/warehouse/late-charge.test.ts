/**
 * What a worker woken after its run's end still learns of its calls (issue 39): an answer to a call
 * that was on the wire when it froze, and a call its fence kept from being sent. Both were counted
 * at their worst case by the attempt that took the work over; once the run is over and its journals
 * are in the lake, they are late records, and the next load corrects the run's figures by them:
 * `harvest_runs.credits_spent` equals the emulator's ledger, and `credits_late` says by how much,
 * after a rebuild from the raw answers too.
 * The real store, journal, client, emulator over HTTP and lake; no Temporal (the attempts are
 * numbered by hand).
 */
import { existsSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { meteredCall } from '../../activities/metered-call.js';
import { landAt } from '../../activities/page-landing.js';
import type { SocialApiClient } from '../../src/api/client.js';
import { CallJournal, SupersededAttemptError } from '../../src/store/call-journal.js';
import { lateJournalRoot, pageLandingKey, runJournalFolder } from '../../src/store/layout.js';
import { LocalStore } from '../../src/store/store.js';
import { loadLandings } from '../../src/warehouse/loader.js';
import { rebuildLake } from '../../src/warehouse/rebuild.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { clientFor, prices } from '../support/client.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';

const API_KEY = 'sk_live_late_charge';
let emulator: TestEmulator;
let api: SocialApiClient;
beforeAll(async () => {
  emulator = await startTestEmulator({ apiKeys: [API_KEY] });
  api = clientFor(emulator, { apiKey: API_KEY });
});
afterAll(async () => {
  await api.close();
  await emulator.close();
});

const ledgerCredits = async () => (await emulator.ledger(API_KEY)).reduce((sum, row) => sum + row.credits, 0);

describe('charges that arrive after a run is over', () => {
  it('are recorded against the run by the next load: its credits equal the ledger, the correction visible', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'late-charge-'));
    const store = new LocalStore(dataDir);
    const handle = (await emulator.catalog()).tiktok.handles[2]!;
    const runId = `late-${Date.now().toString(36)}`;
    const target = `channel:tiktok:${handle}:videos`;
    const worst = 20 * prices['tiktok/channel-videos'];
    const keyOf = (page: number) => pageLandingKey(runId, target, page);
    const place = (page: number) => ({ runId, harvest: 'late', target, page, params: { handle } });

    // Attempt 1 buys page 1, then freezes with page 2 on the wire and page 3 journaled, not yet sent.
    const frozen = await CallJournal.load(store.journals, runId, 'w1');
    await frozen.claim(1);
    const first = await meteredCall({
      journal: frozen,
      key: keyOf(1),
      worst,
      call: (options) => api.page('tiktok', 'channel-videos', { handle, limit: 20 }, options),
      land: landAt(store, place(1)),
      meter: { harvest: 'late', endpoint: 'tiktok/channel-videos', listsItems: true },
    });
    await frozen.intend(keyOf(2), worst);
    await frozen.intend(keyOf(3), worst);
    await frozen.sync();

    // Attempt 2 takes the work over: a stale claim of attempt 1 is refused from now on.
    const taker = await CallJournal.load(store.journals, runId, 'w1');
    await taker.claim(2);
    await expect(CallJournal.load(store.journals, runId, 'w1').then((journal) => journal.claim(1))).rejects.toBeInstanceOf(SupersededAttemptError);
    // The two calls it cannot account for count at their worst case; the run ends with those figures.
    const spent = taker.totals();
    expect(spent).toMatchObject({ credits: first.creditsCharged + 2 * worst, lostCalls: 2 });
    await taker.close();
    await store.writeLanding({ format: 1, kind: 'run', run_id: runId, harvest: 'late', seq: 1, status: 'completed', started_at: new Date().toISOString(), finished_at: new Date().toISOString(), credits_spent: spent.credits });
    await loadLandings(dataDir);
    expect(readdirSync(runJournalFolder(dataDir, runId))).toEqual(['.ended']);
    await expect(CallJournal.load(store.journals, runId, 'w1').then((journal) => journal.claim(3))).rejects.toBeInstanceOf(SupersededAttemptError);

    // Attempt 1 wakes. Page 2's answer arrives (the API charges it now), and page 3 meets the fence.
    const second = await api.page('tiktok', 'channel-videos', { handle, limit: 20, cursor: first.nextCursor });
    await frozen.settle(keyOf(2), second.creditsCharged);
    await expect(frozen.fence()).rejects.toBeInstanceOf(SupersededAttemptError);
    await frozen.cancel(keyOf(3));
    await frozen.close();
    // Nothing came back into the ended run's journals: both records are late ones.
    expect(readdirSync(runJournalFolder(dataDir, runId))).toEqual(['.ended']);
    expect(readdirSync(lateJournalRoot(dataDir))).toHaveLength(1);
    const ledger = await ledgerCredits();
    expect(ledger).toBe(first.creditsCharged + second.creditsCharged);
    expect(spent.credits).not.toBe(ledger);

    await loadLandings(dataDir);
    const [row] = (await queryWarehouse(dataDir, `SELECT credits_spent::INTEGER AS spent, credits_late::INTEGER AS late FROM harvest_runs WHERE run_id = '${runId}'`)).rows;
    expect(row).toEqual({ spent: ledger, late: ledger - spent.credits });
    const late = await queryWarehouse(dataDir, `SELECT record::VARCHAR AS record FROM call_journal WHERE run_id = '${runId}' AND seq >= 1000000000 ORDER BY seq`);
    expect(late.rows.map((lateRow) => JSON.parse(String(lateRow.record)))).toEqual([{ settled: keyOf(2), credits: second.creditsCharged }, { cancelled: keyOf(3) }]);
    expect(existsSync(lateJournalRoot(dataDir)) ? readdirSync(lateJournalRoot(dataDir)) : []).toEqual([]);
    // A load after it changes nothing.
    await loadLandings(dataDir);
    expect((await queryWarehouse(dataDir, `SELECT credits_spent::INTEGER AS spent FROM harvest_runs WHERE run_id = '${runId}'`)).rows).toEqual([{ spent: ledger }]);
    // Nor does a rebuild from the raw answers: the run's status says what the run knew at its end,
    // and the late records kept in the lake correct it again. Before, the rebuild gave the run
    // its status's figure back, and no correction.
    await rebuildLake(dataDir, { store });
    expect((await queryWarehouse(dataDir, `SELECT credits_spent::INTEGER AS spent, credits_late::INTEGER AS late FROM harvest_runs WHERE run_id = '${runId}'`)).rows).toEqual([
      { spent: ledger, late: ledger - spent.credits },
    ]);
    await store.close();
  }, 60_000);
});
