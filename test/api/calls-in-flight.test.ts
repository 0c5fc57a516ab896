/**
 * The client's connections follow the calls its callers put in flight: nothing in it caps them
 * (its pool was once fixed at 16 connections, and raising a run's concurrency past 16 did
 * nothing). Measured where it counts, at the emulator: how many requests it answers at once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientFor } from '../support/client.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { watchServedRequests, type ServedRequests } from '../support/served-requests.js';

let emulator: TestEmulator;
let served: ServedRequests;
let urls: string[];
beforeAll(async () => {
  // Slow answers, so calls in flight overlap for sure; a rate limit far above what is sent.
  emulator = await startTestEmulator({ latencyMs: 300 });
  served = watchServedRequests('/v1/tiktok/stats');
  const page = await emulator.call<{ data: { url: string }[] }>(`/tiktok/channel-videos?handle=${(await emulator.catalog()).tiktok.handles[0]}&limit=50`);
  urls = page.json.data.map((video) => video.url);
});
afterAll(async () => {
  served.stop();
  await emulator.close();
});

describe("the client's calls in flight", () => {
  it.each([32, 64])('%i calls made at once are as many requests the API answers at once', async (inFlight) => {
    const client = clientFor(emulator);
    try {
      // The first call of a process goes alone, to learn the rate limit (src/api/rate-gate.ts).
      await client.get('tiktok', 'stats', { url: urls[0]! });
      served.reset();
      const results = await Promise.all(Array.from({ length: inFlight }, (_, index) => client.get('tiktok', 'stats', { url: urls[index % urls.length]! })));
      expect(results).toHaveLength(inFlight);
      expect(served.mostAtOnce).toBe(inFlight);
      expect(served.byStatus).toEqual(new Map([[200, inFlight]]));
    } finally {
      await client.close();
    }
  });
});
