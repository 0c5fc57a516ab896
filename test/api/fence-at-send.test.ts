/**
 * The fence is read right before a call goes on the wire, not only when its intent is journaled
 * (issue 39): calls of a work waiting at the client's rate gate when a later attempt claims the
 * work (as when its worker froze and Temporal gave its work to another) are not sent, and their
 * intents are cancelled, so the journal's credits equal what the API charged. The real client, rate
 * gate, journal and store, and the emulator over HTTP with a low rate limit. And a fence read before
 * the process stood still (frozen with the call waiting for a connection) is read again before the
 * call is written: seen once in CI, a worker woken after its run was over sent one stats call.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { meteredCall } from '../../activities/metered-call.js';
import type { SocialApiClient } from '../../src/api/client.js';
import { STALL_MS, standStillForTests } from '../../src/api/fence-at-write.js';
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

describe('a process that stalls after a call\'s fence was read, with the call waiting for a connection', () => {
  it('does not send it under that fence: the fence is read again, and a takeover meanwhile stops the call unsent', async () => {
    const apiKey = 'sk_live_fence_stall';
    // A slow API and one connection: the fenced call waits behind the first one, past its fence.
    const slow = await startTestEmulator({ apiKeys: [apiKey], latencyMs: 400 });
    const client = clientFor(slow, { apiKey, connections: 1 });
    try {
      const [first, second] = (await client.page('tiktok', 'channel-videos', { handle: (await slow.catalog()).tiktok.handles[2]!, limit: 2 })).items.map((item) => item.url);
      const before = (await slow.ledger(apiKey)).length;
      const ahead = client.get('tiktok', 'stats', { url: first! });
      let fenceReads = 0;
      const behind = client.get('tiktok', 'stats', { url: second! }, {
        beforeSend: () => {
          fenceReads += 1;
          // The first read passes; the process then stands still for longer than a stall (as a worker
          // frozen by SIGSTOP would: its clock moves on, without the wait), and meanwhile another
          // attempt took the work over.
          if (fenceReads === 1) setTimeout(() => standStillForTests(STALL_MS + 300), 20);
          else throw new SupersededAttemptError('taken over while this process stood still');
        },
      });
      await ahead;
      await expect(behind).rejects.toBeInstanceOf(SupersededAttemptError);
      expect(fenceReads).toBe(2);
      // Only the call ahead reached the API.
      expect((await slow.ledger(apiKey)).length).toBe(before + 1);
    } finally {
      await client.close();
      await slow.close();
    }
  }, 30_000);
});

describe('a process that stalls while a call\'s fence is being read (a round trip to a shared catalog)', () => {
  it('does not send it under that read: the answer, given before the stall, is read again after it', async () => {
    const apiKey = 'sk_live_fence_stall_read';
    const api = await startTestEmulator({ apiKeys: [apiKey] });
    const client = clientFor(api, { apiKey });
    try {
      const [url] = (await client.page('tiktok', 'channel-videos', { handle: (await api.catalog()).tiktok.handles[3]!, limit: 1 })).items.map((item) => item.url);
      const before = (await api.ledger(apiKey)).length;
      let fenceReads = 0;
      const call = client.get('tiktok', 'stats', { url: url! }, {
        beforeSend: async () => {
          fenceReads += 1;
          if (fenceReads > 1) throw new SupersededAttemptError('taken over while this process stood still');
          // The claim is read (it is still this attempt's), its answer is on its way back when
          // the process stands still (a worker frozen with a PostgreSQL answer unread in its
          // socket); another attempt takes the work over meanwhile. The stall watch ticks after
          // the wake, then the old answer is read: the call must not go out under it.
          await new Promise((resolve) => setTimeout(resolve, 10));
          standStillForTests(STALL_MS + 300);
          await new Promise((resolve) => setTimeout(resolve, 300));
        },
      });
      await expect(call).rejects.toBeInstanceOf(SupersededAttemptError);
      expect(fenceReads).toBe(2);
      expect((await api.ledger(apiKey)).length).toBe(before);
    } finally {
      await client.close();
      await api.close();
    }
  }, 30_000);
});

