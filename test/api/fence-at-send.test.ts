/**
 * The fence is read right before a call goes on the wire, not only when its intent is journaled
 * (issue 39): calls of a work waiting at the client's rate gate when a later attempt claims the
 * work (as when its worker froze and Temporal gave its work to another) are not sent, and their
 * intents are cancelled, so the journal's credits equal what the API charged. The real client, rate
 * gate, journal and store, and the emulator over HTTP with a low rate limit.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { meteredCall } from '../../activities/metered-call.js';
import type { SocialApiClient } from '../../src/api/client.js';
import { CallJournal, SupersededAttemptError } from '../../src/store/call-journal.js';
import { FileJournals } from '../../src/store/file-journal.js';
import { LocalStore } from '../../src/store/store.js';
import { clientFor, prices } from '../support/client.js';
import { startTestEmulator, waitFor, type TestEmulator } from '../support/emulator.js';

const API_KEY = 'sk_live_fence_at_send';
const VERIFY_KEY = 'sk_live_fence_at_send_verify';
let emulator: TestEmulator;
let api: SocialApiClient;
let verify: SocialApiClient;
beforeAll(async () => {
  // Two requests a second: most of the calls wait at the rate gate, past their intents.
  emulator = await startTestEmulator({ apiKeys: [API_KEY, VERIFY_KEY], rateLimit: 2 });
  api = clientFor(emulator, { apiKey: API_KEY });
  verify = clientFor(emulator, { apiKey: VERIFY_KEY });
});
afterAll(async () => {
  await api.close();
  await verify.close();
  await emulator.close();
});

describe('calls waiting at the rate gate when their work is claimed by a later attempt', () => {
  it('are not sent: their intents are cancelled, and the journal counts what the API charged', async () => {
    const store = new LocalStore(mkdtempSync(join(tmpdir(), 'fence-at-send-')));
    const handle = (await emulator.catalog()).tiktok.handles[1]!;
    const urls = (await verify.page('tiktok', 'channel-videos', { handle, limit: 8 })).items.map((item) => item.url);
    expect(urls).toHaveLength(8);
    const journal = await CallJournal.load(store.journals, 'run-fence', 'w1');
    await journal.claim(1);
    const worst = prices['tiktok/stats'];
    const outcomes = Promise.allSettled(
      urls.map((url, index) =>
        meteredCall({
          journal,
          key: `run-fence/item:tiktok:stats:${index}/page-000001.json`,
          worst,
          call: (options) => api.get('tiktok', 'stats', { url }, options),
          land: () => undefined,
          meter: { harvest: 'fence', endpoint: 'tiktok/stats' },
        }),
      ),
    );
    // Every intent is journaled at once; the first call is answered while the rest wait at the gate.
    await waitFor(async () => ((await emulator.ledger(API_KEY)).length >= 1 ? true : undefined), 10_000, 'the first call charged');
    const taker = await CallJournal.load(store.journals, 'run-fence', 'w1');
    await taker.claim(2);
    const settled = await outcomes;
    const refused = settled.filter((outcome) => outcome.status === 'rejected');
    expect(refused.length).toBeGreaterThan(0);
    for (const outcome of refused) expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(SupersededAttemptError);
    const ledger = await emulator.ledger(API_KEY);
    // Sent: only the calls that passed the fence before the claim; each answered one was charged.
    expect(ledger.length).toBe(settled.length - refused.length);
    // The refused calls' cancellations, and the settlements of the calls that went out, came after
    // the claim: they are the run's late records (which the load archiving the run adds to it). The
    // journal with them counts exactly what the API charged.
    const records = await store.journals.journalLog('run-fence', 'w1').records();
    const late = await store.journals.lateLog('run-fence', 'w1').records();
    expect(late.filter((record) => 'cancelled' in record)).toHaveLength(refused.length);
    const together = new FileJournals(mkdtempSync(join(tmpdir(), 'fence-at-send-')));
    const log = together.journalLog('run-fence', 'w1');
    for (const record of [...records, ...late]) await log.append(record);
    await log.close();
    const replayed = await CallJournal.load(together, 'run-fence', 'w1');
    expect(replayed.totals()).toEqual({ credits: ledger.reduce((sum, row) => sum + row.credits, 0), settledCalls: ledger.length, lostCalls: 0, lostCredits: 0 });
    await journal.close();
    await taker.close();
    await store.close();
  }, 30_000);
});
