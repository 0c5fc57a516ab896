import { existsSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallJournal } from '../../src/store/call-journal.js';
import { runJournalFolder } from '../../src/store/layout.js';
import { LocalStore } from '../../src/store/store.js';
import { archivedJournalLogs } from '../../src/warehouse/journal-archive.js';
import { loadLandings } from '../../src/warehouse/loader.js';
import { maintainLake } from '../../src/warehouse/maintenance.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { landedSample } from '../support/sample-harvest.js';

/** Whether a run's journals are still in the data directory: removed, its folder keeps only the mark that the run ended. */
function hasJournals(dataDir: string, runId: string): boolean {
  const folder = runJournalFolder(dataDir, runId);
  return existsSync(folder) && readdirSync(folder).some((name) => name !== '.ended');
}

let emulator: TestEmulator;
beforeAll(async () => {
  emulator = await startTestEmulator();
});
afterAll(() => emulator.close());

describe('the call journals of runs that are over', () => {
  it('go into the lake with the load that clears their answers, record for record; a run left for a retry keeps its journal', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'journals-'));
    const store = new LocalStore(dataDir);
    // run-done completed; run-failed failed (a retry reads its journal).
    await landedSample(emulator, 'run-done', dataDir);
    await store.writeLanding({ format: 1, kind: 'run', run_id: 'run-failed', harvest: 'sample', seq: 1, status: 'failed', started_at: new Date().toISOString(), finished_at: new Date().toISOString() });
    for (const runId of ['run-done', 'run-failed']) {
      const log = store.journals.journalLog(runId, 'work-1');
      await log.append({ intent: `${runId}/t/page-000001.json`, worst: 10 });
      await log.append({ lost: `${runId}/t/page-000001.json`, credits: 7 });
      await log.close();
    }
    await loadLandings(dataDir);
    expect(hasJournals(dataDir, 'run-done')).toBe(false);
    expect(hasJournals(dataDir, 'run-failed')).toBe(true);
    const archived = (await archivedJournalLogs(dataDir)).get('run-done') ?? [];
    expect(archived.map((log) => log.work)).toEqual(['work-1']);
    expect(await archived[0]!.records()).toEqual([
      { intent: 'run-done/t/page-000001.json', worst: 10 },
      { lost: 'run-done/t/page-000001.json', credits: 7 },
    ]);
    expect((await CallJournal.replay(archived[0]!)).totals()).toMatchObject({ lostCalls: 1, lostCredits: 7 });
    expect((await archivedJournalLogs(dataDir)).has('run-failed')).toBe(false);
    // A second load has nothing to copy again.
    await loadLandings(dataDir);
    expect((await queryWarehouse(dataDir, "SELECT count(*)::INTEGER AS n FROM call_journal WHERE run_id = 'run-done'")).rows).toEqual([{ n: 2 }]);
    // They go with the raw answers' retention, when one is set.
    expect((await maintainLake(dataDir, { keepRawAnswersDays: 1 })).journalRecordsExpired).toBe(0);
    expect((await maintainLake(dataDir, { keepRawAnswersDays: 0 })).journalRecordsExpired).toBe(2);
    expect((await archivedJournalLogs(dataDir)).size).toBe(0);
  }, 120_000);

  it('a load killed after the copy committed and before the journals went copies them again in place, never twice', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'journals-'));
    const store = new LocalStore(dataDir);
    await landedSample(emulator, 'run-killed', dataDir);
    const log = store.journals.journalLog('run-killed', 'work-1');
    await log.append({ intent: 'run-killed/t/page-000001.json', worst: 10 });
    await log.append({ settled: 'run-killed/t/page-000001.json', credits: 4 });
    await log.close();
    // The load is killed just as it begins to clear the run: its copy of the journals is committed.
    await expect(
      loadLandings(dataDir, {
        beforeClear: () => {
          throw new Error('killed');
        },
      }),
    ).rejects.toThrow('killed');
    expect(hasJournals(dataDir, 'run-killed')).toBe(true);
    await loadLandings(dataDir);
    expect(hasJournals(dataDir, 'run-killed')).toBe(false);
    expect((await queryWarehouse(dataDir, "SELECT count(*)::INTEGER AS n FROM call_journal WHERE run_id = 'run-killed'")).rows).toEqual([{ n: 2 }]);
  }, 120_000);

  it('journals an earlier version left beside cleared answers are removed by the maintenance once older than the snapshots it keeps', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'journals-'));
    const store = new LocalStore(dataDir);
    await landedSample(emulator, 'run-old', dataDir);
    await loadLandings(dataDir);
    // Left by an earlier version, which kept a run's journal after clearing its answers.
    const log = store.journals.journalLog('run-old', 'work-9');
    await log.append({ intent: 'run-old/t/page-000001.json', worst: 10 });
    await log.close();
    expect((await maintainLake(dataDir)).journalsRemoved).toBe(0);
    expect(hasJournals(dataDir, 'run-old')).toBe(true);
    expect((await maintainLake(dataDir, { keepSnapshotsHours: 0 })).journalsRemoved).toBe(1);
    expect(hasJournals(dataDir, 'run-old')).toBe(false);
  }, 120_000);
});
