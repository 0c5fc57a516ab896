import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runJournalFolder } from '../../src/store/layout.js';
import { LocalStore } from '../../src/store/store.js';
import { loadLandings } from '../../src/warehouse/loader.js';
import { maintainLake } from '../../src/warehouse/maintenance.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { landedSample } from '../support/sample-harvest.js';

let emulator: TestEmulator;
beforeAll(async () => {
  emulator = await startTestEmulator();
});
afterAll(() => emulator.close());

describe('the call journals of runs that are over', () => {
  it('are removed by the maintenance once older than the snapshots it keeps; a run left for a retry keeps its journal', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'journals-'));
    const store = new LocalStore(dataDir);
    // run-done completed; run-failed failed (a retry reads its journal).
    await landedSample(emulator, 'run-done', dataDir);
    await store.writeLanding({ format: 1, kind: 'run', run_id: 'run-failed', harvest: 'sample', seq: 1, status: 'failed', started_at: new Date().toISOString(), finished_at: new Date().toISOString() });
    for (const runId of ['run-done', 'run-failed']) {
      const log = store.journals.journalLog(runId, 'work-1');
      await log.append({ intent: `${runId}/t/page-000001.json`, worst: 10 });
      await log.close();
    }
    await loadLandings(dataDir);
    // Within the snapshots' week: kept.
    expect((await maintainLake(dataDir)).journalsRemoved).toBe(0);
    expect(existsSync(runJournalFolder(dataDir, 'run-done'))).toBe(true);
    // Past it (snapshots kept 0 hours): the completed run's journal goes, the failed run's stays.
    expect((await maintainLake(dataDir, { keepSnapshotsHours: 0 })).journalsRemoved).toBe(1);
    expect(existsSync(runJournalFolder(dataDir, 'run-done'))).toBe(false);
    expect(existsSync(runJournalFolder(dataDir, 'run-failed'))).toBe(true);
  }, 120_000);
});
