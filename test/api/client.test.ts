import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { SocialApiClient } from '../../src/api/client.js';
import {
  AuthenticationError,
  CursorExpiredError,
  FeatureUnavailableError,
  InsufficientCreditsError,
  InvalidRequestError,
  NetworkError,
  NotFoundError,
  RateLimitedError,
  ResponseValidationError,
  ServerError,
} from '../../src/api/errors.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { clientFor, memoryLogger, prices } from '../support/client.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
async function emulatorFor(options: Parameters<typeof startTestEmulator>[0] = {}) {
  const emulator = await startTestEmulator(options);
  cleanups.push(() => emulator.close());
  return emulator;
}
function track(client: SocialApiClient) {
  cleanups.push(() => client.close());
  return client;
}

describe('the base URL', () => {
  it("takes the spec's bare base_url and one ending in /v1, with or without a trailing slash", async () => {
    const emulator = await emulatorFor();
    const handle = (await emulator.catalog()).tiktok.handles[0]!;
    for (const baseUrl of [emulator.origin, `${emulator.origin}/`, emulator.baseUrl, `${emulator.baseUrl}/`]) {
      const client = track(new SocialApiClient({ baseUrl, apiKey: emulator.apiKey, prices }));
      const page = await client.page('tiktok', 'channel-videos', { handle, limit: 2 });
      expect(page.items, baseUrl).toHaveLength(2);
      expect(await client.listWebhooks(), baseUrl).toEqual([]);
    }
    expect((await emulator.ledger()).map((row) => row.endpoint)).toEqual(Array(4).fill('tiktok/channel-videos'));
  });
});

describe('every endpoint through the client', () => {
  it('objects and pages on both platforms come back typed, with their cost', async () => {
    const emulator = await emulatorFor();
    const client = track(clientFor(emulator));
    const catalog = await emulator.catalog();
    const handle = catalog.tiktok.handles[0]!;
    const igHandle = catalog.instagram.handles[0]!;

    const videos = await client.page('tiktok', 'channel-videos', { handle, limit: 3 });
    expect(videos.items).toHaveLength(3);
    expect(videos.creditsCharged).toBe(9);
    expect(videos.creditsExpected).toBe(9);
    expect(videos.nextCursor).toBeTruthy();
    const url = videos.items[0]!.url;
    const transcript = await client.get('tiktok', 'transcript', { url });
    expect(transcript.data.segments.length).toBeGreaterThan(0);
    expect((await client.get('tiktok', 'summary', { url })).data.summary).toContain(transcript.data.segments[0]!.text);
    const stats = await client.get('tiktok', 'stats', { url });
    expect(stats.data.author.handle).toBe(handle);
    expect(stats.creditsCharged).toBe(prices['tiktok/stats']);
    expect(stats.cache).toBe('MISS');
    expect((await client.get('tiktok', 'stats', { url })).cache).toBe('HIT');
    expect((await client.get('tiktok', 'stats', { url, fresh: true })).cache).toBe('MISS');
    expect((await client.page('tiktok', 'comments', { url, limit: 2 })).items.length).toBeLessThanOrEqual(2);
    expect((await client.get('tiktok', 'channel-stats', { handle })).data.handle).toBe(handle);
    expect((await client.page('tiktok', 'search', { query: 'yoga', limit: 4 })).items).toHaveLength(4);
    expect((await client.page('tiktok', 'hashtag-search', { query: '#yoga', limit: 4 })).creditsCharged).toBe(4 * prices['tiktok/hashtag-search']);

    const reels = await client.page('instagram', 'channel-reels', { handle: igHandle, limit: 2 });
    const posts = await client.page('instagram', 'channel-posts', { handle: igHandle, limit: 2 });
    expect(posts.meta.item).toBe('post');
    const reelUrl = reels.items[0]!.url;
    expect((await client.get('instagram', 'transcript', { url: reelUrl })).data.source).toBe('audio');
    expect((await client.get('instagram', 'summary', { url: reelUrl })).creditsCharged).toBe(prices['instagram/summary']);
    expect((await client.get('instagram', 'stats', { url: posts.items[0]!.url })).creditsCharged).toBe(1);
    expect((await client.page('instagram', 'comments', { url: reelUrl, limit: 1 })).meta.limit).toBe(1);
    expect((await client.get('instagram', 'channel-stats', { handle: igHandle })).data.platform).toBe('instagram');
    expect((await client.page('instagram', 'reels-search', { query: 'latte art', limit: 2 })).items).toHaveLength(2);
    const download = await client.get('instagram', 'download', { url: reelUrl });
    expect(download.data.mime_type).toBe('video/mp4');
    expect(download.creditsRemaining).toBeGreaterThan(0);

    const csv = await client.raw('tiktok', 'channel-videos', { handle, limit: 2, format: 'csv' });
    expect(csv.text.split('\r\n')[0]).toBe('id,url,caption,posted_at,metrics_views,metrics_likes,metrics_comments');
    expect(csv.creditsCharged).toBe(6);
    expect(csv.creditsExpected).toBe(6);
    expect(csv.nextCursor).toBeTruthy();
    const text = await client.raw('tiktok', 'transcript', { url, format: 'text' });
    expect(text.text).toBe(transcript.data.text);

    // 21 billed calls above, each one row of the emulator's ledger; the balance the client last
    // saw is the start balance less all of them.
    const ledger = await emulator.ledger();
    expect(ledger.length).toBe(21);
    expect(text.creditsRemaining).toBe(1_000_000 - ledger.reduce((sum, row) => sum + row.credits, 0));
  });

  it('a charge that differs from the price table is logged as a warning with its request_id', async () => {
    const emulator = await emulatorFor();
    const { logger, lines } = memoryLogger();
    const client = track(clientFor(emulator, { prices: { ...prices, 'tiktok/channel-stats': 5 }, logger }));
    const handle = (await emulator.catalog()).tiktok.handles[0]!;
    const result = await client.get('tiktok', 'channel-stats', { handle });
    expect(result.creditsCharged).toBe(3);
    expect(result.creditsExpected).toBe(5);
    const warning = lines.map((line) => JSON.parse(line) as Record<string, unknown>).find((line) => line.msg === 'credits charged differ from the price table');
    expect(warning).toMatchObject({ requestId: result.requestId, creditsCharged: 3, creditsExpected: 5, level: 40 });
  });

  it('platform path segments are configurable', async () => {
    const emulator = await emulatorFor();
    const client = track(clientFor(emulator, { platformPaths: { tiktok: 'instagram' } }));
    const handle = (await emulator.catalog()).instagram.handles[0]!;
    // With tiktok mapped onto the instagram segment, a tiktok call reaches the instagram route.
    expect((await client.get('tiktok', 'channel-stats', { handle })).data.platform).toBe('instagram');
  });
});

describe('typed errors', () => {
  it('one class per failure, each carrying code and request_id', async () => {
    const emulator = await emulatorFor();
    const client = track(clientFor(emulator));
    const handle = (await emulator.catalog()).tiktok.handles[0]!;
    const url = (await client.page('tiktok', 'channel-videos', { handle, limit: 1 })).items[0]!.url;

    const auth = track(clientFor(emulator, { apiKey: 'sk_live_wrong' }));
    await expect(auth.get('tiktok', 'channel-stats', { handle })).rejects.toSatisfy((error) => error instanceof AuthenticationError && error.code === 'invalid_api_key' && error.requestId!.startsWith('req_'));
    await expect(client.get('tiktok', 'channel-stats', { handle: `@${handle}` })).rejects.toSatisfy((error) => error instanceof InvalidRequestError && error.param === 'handle');
    await expect(client.get('tiktok', 'channel-stats', { handle: 'nobody_there' })).rejects.toBeInstanceOf(NotFoundError);
    await expect(client.get('tiktok', 'download', { url })).rejects.toSatisfy((error) => error instanceof FeatureUnavailableError && error.status === 503);

    await emulator.admin('keys', { api_key: 'sk_live_small', credits: 10 });
    const poor = track(clientFor(emulator, { apiKey: 'sk_live_small' }));
    await expect(poor.page('tiktok', 'channel-videos', { handle, limit: 5 })).rejects.toSatisfy(
      (error) => error instanceof InsufficientCreditsError && error.requiredCredits === 15 && error.remainingCredits === 10,
    );
    // Checked locally before any request: a call that can only fail costs nothing.
    await expect(client.get('tiktok', 'stats', {})).rejects.toSatisfy((error) => error instanceof InvalidRequestError && error.param === 'url' && error.requestId === undefined);
  });

  it('ServerError and RateLimitedError after bounded attempts; NetworkError when unreachable', async () => {
    const faulty = await emulatorFor({ faultRate: 1 });
    const handle = (await faulty.catalog()).tiktok.handles[0]!;
    const { logger, lines } = memoryLogger();
    const client = track(clientFor(faulty, { retry: { maxAttempts: 3, minDelayMs: 1, maxDelayMs: 5 }, logger }));
    await expect(client.get('tiktok', 'channel-stats', { handle })).rejects.toBeInstanceOf(ServerError);
    expect(lines.filter((line) => line.includes('retrying API call'))).toHaveLength(2);

    const limited = await emulatorFor({ rateLimit: 1 });
    // The bucket emptied by a request from elsewhere (another process with the key): this
    // process's rate gate has not seen it (one that has waits for the refill instead of meeting the 429).
    expect((await limited.call(`/tiktok/channel-stats?handle=${handle}`)).status).toBe(200);
    const strict = track(clientFor(limited, { retry: { maxAttempts: 1 } }));
    await expect(strict.get('tiktok', 'channel-stats', { handle })).rejects.toSatisfy((error) => error instanceof RateLimitedError && error.retryAfterMs === 1000);

    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const unreachable = track(new SocialApiClient({ baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: 'sk_live_x', prices, retry: { maxAttempts: 2, minDelayMs: 1, maxDelayMs: 2 } }));
    await expect(unreachable.get('tiktok', 'channel-stats', { handle })).rejects.toBeInstanceOf(NetworkError);
  });

  it('no 4xx other than 429 is retried', async () => {
    const emulator = await emulatorFor();
    const { logger, lines } = memoryLogger();
    const client = track(clientFor(emulator, { logger }));
    await expect(client.get('tiktok', 'channel-stats', { handle: 'nobody_there' })).rejects.toBeInstanceOf(NotFoundError);
    const url = 'https://www.tiktok.com/@x/video/7301234567890123456';
    await expect(client.get('tiktok', 'download', { url })).rejects.toBeInstanceOf(FeatureUnavailableError);
    expect(lines.filter((line) => line.includes('retrying'))).toEqual([]);
  });

  it('an answer of the wrong shape is a ResponseValidationError with the request_id and raw body', async () => {
    const body = JSON.stringify({ data: { platform: 'tiktok', handle: 'x' }, request_id: 'req_abc' });
    const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': 'req_abc', 'x-credits-charged': '3' }).end(body));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => server.close(resolve)));
    const client = track(new SocialApiClient({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, apiKey: 'sk_live_x', prices }));
    const error = await client.get('tiktok', 'channel-stats', { handle: 'x' }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ResponseValidationError);
    expect((error as ResponseValidationError).requestId).toBe('req_abc');
    expect((error as ResponseValidationError).rawBody).toBe(body);
    expect((error as Error).message).toMatch(/data\.name/);
  });
});

describe('retries never charge twice', () => {
  it('a 500-item pull under faults and rate limiting succeeds, and the ledger holds each page once', async () => {
    const emulator = await emulatorFor({ faultRate: 0.25, rateLimit: 15 });
    const { logger, lines } = memoryLogger();
    const client = track(clientFor(emulator, { logger, retry: { maxAttempts: 10, minDelayMs: 5, maxDelayMs: 100 } }));
    const handle = (await emulator.catalog()).tiktok.handles[8]!;
    const ids: string[] = [];
    const requestIds: string[] = [];
    for await (const page of client.pages('tiktok', 'channel-videos', { handle }, { maxItems: 500, pageSize: 25 })) {
      ids.push(...page.items.map((item) => item.id));
      requestIds.push(page.requestId);
    }
    expect(ids).toHaveLength(500);
    expect(new Set(ids).size).toBe(500);
    expect(lines.filter((line) => line.includes('retrying API call')).length).toBeGreaterThan(0);
    const ledger = await emulator.ledger();
    expect(ledger.map((row) => row.request_id).sort()).toEqual([...requestIds].sort());
    expect(ledger.reduce((sum, row) => sum + row.units, 0)).toBe(500);
    expect(ledger.reduce((sum, row) => sum + row.credits, 0)).toBe(500 * prices['tiktok/channel-videos']);
  });
});

describe('pagination', () => {
  it('resumes from a saved cursor with nothing duplicated or missed', async () => {
    const emulator = await emulatorFor();
    const handle = (await emulator.catalog()).tiktok.handles[9]!;
    const whole: string[] = [];
    for await (const page of track(clientFor(emulator)).pages('tiktok', 'channel-videos', { handle }, { maxItems: 150, pageSize: 30 })) whole.push(...page.items.map((item) => item.id));

    const firstRun: string[] = [];
    let saved: string | undefined;
    for await (const page of track(clientFor(emulator)).pages('tiktok', 'channel-videos', { handle }, { maxItems: 60, pageSize: 30 })) {
      firstRun.push(...page.items.map((item) => item.id));
      saved = page.nextCursor;
    }
    const resumed: string[] = [];
    for await (const page of track(clientFor(emulator)).pages('tiktok', 'channel-videos', { handle }, { maxItems: 90, pageSize: 30, cursor: saved })) resumed.push(...page.items.map((item) => item.id));
    expect([...firstRun, ...resumed]).toEqual(whole);
  });

  it('an expired cursor surfaces as CursorExpiredError', async () => {
    const emulator = await emulatorFor({ cursorTtlSeconds: 60 });
    const client = track(clientFor(emulator));
    const handle = (await emulator.catalog()).tiktok.handles[0]!;
    const first = await client.page('tiktok', 'channel-videos', { handle, limit: 5 });
    await emulator.admin('clock', { advance_seconds: 61 });
    await expect(client.page('tiktok', 'channel-videos', { handle, limit: 5, cursor: first.nextCursor })).rejects.toSatisfy((error) => error instanceof CursorExpiredError && error.code === 'cursor_expired');
  });

  it('maxItems sizes the last request: nothing beyond the bound is bought', async () => {
    const emulator = await emulatorFor();
    const client = track(clientFor(emulator));
    const query = (await emulator.catalog()).tiktok.queries[0]!;
    let items = 0;
    for await (const page of client.pages('tiktok', 'search', { query }, { maxItems: 73 })) items += page.items.length;
    expect(items).toBe(73);
    const ledger = await emulator.ledger();
    expect(ledger.map((row) => row.units)).toEqual([50, 23]);
    expect(ledger.reduce((sum, row) => sum + row.credits, 0)).toBe(73 * prices['tiktok/search']);
  });
});

export type { TestEmulator };
