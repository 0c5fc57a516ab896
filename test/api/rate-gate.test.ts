import pLimit from 'p-limit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientFor, memoryLogger } from '../support/client.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';

let emulator: TestEmulator;
beforeAll(async () => {
  emulator = await startTestEmulator({ rateLimit: 40 });
});
afterAll(async () => {
  await emulator.close();
});

describe("the client's rate gate", () => {
  it("16 calls in flight against a limit of 40 per second: calls go out at the pace the API's headers tell, with next to no 429s", async () => {
    const { logger, lines } = memoryLogger();
    const client = clientFor(emulator, { logger });
    try {
      const catalog = await emulator.catalog();
      const urls: string[] = [];
      for await (const page of client.pages('tiktok', 'channel-videos', { handle: catalog.tiktok.handles[0]! }, { maxItems: 160 })) urls.push(...page.items.map((item) => item.url));
      const limit = pLimit(16);
      const results = await Promise.all(urls.map((url) => limit(() => client.get('tiktok', 'stats', { url }))));
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
