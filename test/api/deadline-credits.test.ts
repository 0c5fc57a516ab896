/**
 * A call whose deadline runs out between its retries, before another attempt is sent, was never
 * charged when every attempt before was answered with an error status: its journal counts
 * nothing, neither credits nor a lost call. (The run reported 1,500 credits the ledger
 * never charged, from ten such calls counted as lost at their worst case.)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { meteredCall } from '../../activities/metered-call.js';
import { CallDeadlineError } from '../../src/api/errors.js';
import { CallJournal } from '../../src/store/call-journal.js';
import { LocalStore } from '../../src/store/store.js';
import { clientFor } from '../support/client.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';

let emulator: TestEmulator;
let dataDir: string;
beforeAll(async () => {
  // Every answer is an injected fault (a 5xx, never charged).
  emulator = await startTestEmulator({ faultRate: 1 });
  dataDir = mkdtempSync(join(tmpdir(), 'deadline-credits-'));
});
afterAll(async () => {
  await emulator?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('a deadline that runs out before an attempt is sent', () => {
  it('leaves the call uncounted when every attempt was answered with an error', async () => {
    // Retries spaced wider than the deadline: it runs out while the client waits to try again.
    const client = clientFor(emulator, { retry: { minDelayMs: 400, maxDelayMs: 400, maxElapsedMs: 20_000 } });
    const store = new LocalStore(dataDir);
    const journal = await CallJournal.load(store.journals, 'run-deadline', 'w1');
    const catalog = await emulator.catalog();
    try {
      await expect(
        meteredCall({
          journal,
          key: 'page-1',
          worst: 150,
          call: (options) => client.page('tiktok', 'channel-videos', { handle: catalog.tiktok.handles[0]!, limit: 50 }, { ...options, deadlineMs: 600 }),
          land: async () => undefined,
          meter: { harvest: 'deadline', endpoint: 'tiktok/channel-videos' },
        }),
      ).rejects.toBeInstanceOf(CallDeadlineError);
      const totals = (await CallJournal.load(store.journals, 'run-deadline', 'w1')).totals();
      expect(totals).toMatchObject({ credits: 0, lostCalls: 0 });
      expect(await emulator.ledger(emulator.apiKey)).toEqual([]);
    } finally {
      await journal.close();
      await client.close();
    }
  });
});
