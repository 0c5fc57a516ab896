import { AsyncLocalStorage } from 'node:async_hooks';
import pLimit from 'p-limit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientFor, memoryLogger } from '../support/client.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { watchServedRequests, type ServedRequests } from '../support/served-requests.js';

/** Requests the emulator refused with 429, as a share of all it answered. */
function refusedShare(served: ServedRequests): number {
  const answered = [...served.byStatus.values()].reduce((sum, count) => sum + count, 0);
  return (served.byStatus.get(429) ?? 0) / answered;
}

describe("the client's rate gate", () => {
  let emulator: TestEmulator;
  beforeAll(async () => {
    emulator = await startTestEmulator({ rateLimit: 40 });
  });
  afterAll(async () => {
    await emulator.close();
  });

  it("16 calls in flight against a limit of 40 per second: calls go out at the pace the API's headers tell, with next to no 429s", async () => {
    const { logger, lines } = memoryLogger();
    const client = clientFor(emulator, { logger });
    try {
      const catalog = await emulator.catalog();
      const listed: string[] = [];
      for await (const page of client.pages('tiktok', 'channel-videos', { handle: catalog.tiktok.handles[0]! }, { maxItems: 160 })) listed.push(...page.items.map((item) => item.url));
      const limit = pLimit(16);
      const results = await Promise.all(listed.map((url) => limit(() => client.get('tiktok', 'stats', { url }))));
      expect(results).toHaveLength(160);
      const retried = lines.filter((line) => line.includes('retrying API call'));
      // Every retry here is a 429. Without the gate, every refill is met by 16 requests at once
      // (48 429s for these 160 calls, measured); with it, the listing's answers have told the
      // limit, and the calls go out at its pace.
      expect(retried.every((line) => line.includes('"status":429'))).toBe(true);
      expect(retried.length).toBeLessThanOrEqual(4);
    } finally {
      await client.close();
    }
  });
});

describe('the rate limit, shared', () => {
  const RATE = 50;
  let emulator: TestEmulator;
  let served: ServedRequests;
  let urls: string[];
  beforeAll(async () => {
    emulator = await startTestEmulator({ rateLimit: RATE });
    served = watchServedRequests('/v1/tiktok/stats');
    const page = await emulator.call<{ data: { url: string }[] }>(`/tiktok/channel-videos?handle=${(await emulator.catalog()).tiktok.handles[1]}&limit=50`);
    urls = page.json.data.map((video) => video.url);
  });
  afterAll(async () => {
    served.stop();
    await emulator.close();
  });

  it('400 calls with 64 in flight, through two clients of one key, at 50 requests per second: at most 1% of requests refused with 429', async () => {
    // Two clients of the key in one process (a worker's, its key check's) pace against one budget.
    const clients = [clientFor(emulator), clientFor(emulator)];
    try {
      served.reset();
      const limit = pLimit(64);
      const results = await Promise.all(Array.from({ length: 400 }, (_, index) => limit(() => clients[index % 2]!.get('tiktok', 'stats', { url: urls[index % urls.length]! }))));
      expect(results).toHaveLength(400);
      expect(served.byStatus.get(200)).toBe(400);
      expect(refusedShare(served)).toBeLessThanOrEqual(0.01);
    } finally {
      await Promise.all(clients.map((client) => client.close()));
    }
  });

  it('two runs waiting on the rate limit take turns: one with 48 calls in flight gets no more of it than one with 8', async () => {
    const run = new AsyncLocalStorage<string>();
    const client = clientFor(emulator, { callerOf: () => run.getStore() });
    try {
      // The bucket emptied first, so that every call after waits its turn.
      await Promise.all(Array.from({ length: RATE }, (_, index) => client.get('tiktok', 'stats', { url: urls[index % urls.length]! })));
      served.reset();
      const done = { wide: 0, narrow: 0 };
      let narrowFinished = false;
      /** Calls `inFlight` at a time for `name`, `calls` in all or until the narrow run has finished. */
      const harvest = (name: 'wide' | 'narrow', inFlight: number, calls: number) =>
        run.run(name, () =>
          Promise.all(
            Array.from({ length: inFlight }, async () => {
              while (done[name] < calls && !(name === 'wide' && narrowFinished)) {
                await client.get('tiktok', 'stats', { url: urls[done[name] % urls.length]! });
                done[name]++;
              }
            }),
          ),
        );
      const wide = harvest('wide', 48, 1_000);
      await harvest('narrow', 8, 100);
      narrowFinished = true;
      const wideWhenNarrowFinished = done.wide;
      await wide;
      // In turns, the wide run has had about as many calls as the narrow one's 100, give or take
      // the calls each has in flight; first come, first served, it would have had six times as many.
      expect(wideWhenNarrowFinished).toBeGreaterThanOrEqual(100 - 8);
      expect(wideWhenNarrowFinished).toBeLessThanOrEqual(100 + 48);
      expect(refusedShare(served)).toBeLessThanOrEqual(0.01);
    } finally {
      await client.close();
    }
  });
});
