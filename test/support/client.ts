import { Writable } from 'node:stream';
import { SocialApiClient, type ClientOptions } from '../../src/api/client.js';
import { loadPriceTable } from '../../src/config/prices.js';
import { createLogger, type Logger } from '../../src/logger.js';
import type { TestEmulator } from './emulator.js';

export const prices = loadPriceTable();

/** A logger whose lines are kept in memory, to assert on what was (and was not) logged. */
export function memoryLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { logger: createLogger({ level: 'debug', destination }), lines };
}

export function clientFor(emulator: TestEmulator, options: Partial<ClientOptions> = {}): SocialApiClient {
  return new SocialApiClient({
    baseUrl: emulator.baseUrl,
    apiKey: emulator.apiKey,
    prices,
    retry: { minDelayMs: 5, maxDelayMs: 50, maxElapsedMs: 20_000 },
    ...options,
  });
}

/** Of these TikTok channels, the one that posts most often: its newest two videos are the closest in time. */
export async function busiestTikTokChannel(client: SocialApiClient, handles: readonly string[]): Promise<string> {
  let best = { handle: '', intervalMs: Number.POSITIVE_INFINITY };
  for (const handle of handles) {
    const { items } = await client.page('tiktok', 'channel-videos', { handle, limit: 2 });
    const intervalMs = Date.parse(items[0]!.posted_at!) - Date.parse(items[1]!.posted_at!);
    if (intervalMs < best.intervalMs) best = { handle, intervalMs };
  }
  return best.handle;
}
