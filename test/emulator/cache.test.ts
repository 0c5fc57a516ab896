import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { q, startTestEmulator, type TestEmulator } from '../support/emulator.js';

let emulator: TestEmulator;
let handle: string;
let newestUrl: string;

beforeEach(async () => {
  emulator = await startTestEmulator();
  handle = (await emulator.catalog()).tiktok.handles[2]!;
  newestUrl = (await emulator.call<{ data: { url: string }[] }>(`/tiktok/channel-videos?handle=${handle}&limit=1`)).json.data[0]!.url;
});
afterEach(() => emulator.close());

type Stats = { data: { metrics: { views: number } } };

describe('cache policy', () => {
  it('MISS, then HIT at the same price; fresh=true is a MISS at the same price', async () => {
    const path = `/tiktok/stats?url=${q(newestUrl)}`;
    const first = await emulator.call(path);
    const second = await emulator.call(path);
    const fresh = await emulator.call(`${path}&fresh=true`);
    expect([first.headers['x-cache'], second.headers['x-cache'], fresh.headers['x-cache']]).toEqual(['MISS', 'HIT', 'MISS']);
    expect([first, second, fresh].map((result) => result.headers['x-credits-charged'])).toEqual(['3', '3', '3']);
  });

  it('age-aware: a cached answer keeps its metrics until it expires (at least 15 minutes), fresh sees the growth', async () => {
    const path = `/tiktok/stats?url=${q(newestUrl)}`;
    const first = await emulator.call<Stats>(path);
    await emulator.admin('clock', { advance_seconds: 600 });
    const cached = await emulator.call<Stats>(path);
    expect(cached.headers['x-cache']).toBe('HIT');
    expect(cached.json.data.metrics).toEqual(first.json.data.metrics);
    const fresh = await emulator.call<Stats>(`${path}&fresh=true`);
    expect(fresh.json.data.metrics.views).toBeGreaterThan(first.json.data.metrics.views);
    // Age-aware: kept a quarter of the content's age at the time it was stored, 15 min to 7 days.
    // The API's Date header is its (emulated) clock.
    const emulatedStoredAt = Date.parse(String(fresh.headers.date));
    const postedAt = Date.parse((fresh.json.data as unknown as { posted_at: string }).posted_at);
    const ttlSeconds = Math.min(7 * 86_400, Math.max(900, (emulatedStoredAt - postedAt) / 4 / 1000));
    await emulator.admin('clock', { advance_seconds: ttlSeconds - 120 });
    expect((await emulator.call(path)).headers['x-cache']).toBe('HIT');
    await emulator.admin('clock', { advance_seconds: 240 });
    expect((await emulator.call(path)).headers['x-cache']).toBe('MISS');
  });

  it('channel lists: page 1 is cached for 1 hour, deeper pages for 3 hours', async () => {
    const first = await emulator.call<{ meta: { cursor: string } }>(`/tiktok/channel-videos?handle=${handle}&limit=5`);
    const second = await emulator.call(`/tiktok/channel-videos?handle=${handle}&limit=5&cursor=${q(first.json.meta.cursor)}`);
    expect(second.headers['x-cache']).toBe('MISS');
    await emulator.admin('clock', { advance_seconds: 61 * 60 });
    expect((await emulator.call(`/tiktok/channel-videos?handle=${handle}&limit=5`)).headers['x-cache']).toBe('MISS');
    // The old cursor has expired (10 minutes), so ask for page 2 through a new page 1's cursor.
    const again = await emulator.call<{ meta: { cursor: string } }>(`/tiktok/channel-videos?handle=${handle}&limit=5&fresh=true`);
    const deeper = await emulator.call(`/tiktok/channel-videos?handle=${handle}&limit=5&cursor=${q(again.json.meta.cursor)}`);
    expect(deeper.headers['x-cache']).toBe('HIT');
  });

  it('transcripts are cached forever', async () => {
    const path = `/tiktok/transcript?url=${q(newestUrl)}`;
    await emulator.call(path);
    await emulator.admin('clock', { advance_seconds: 400 * 86_400 });
    const later = await emulator.call(path);
    expect(later.headers['x-cache']).toBe('HIT');
    expect(later.headers['x-credits-charged']).toBe('8');
  });

  it('channel-stats is cached 12 hours', async () => {
    const path = `/instagram/channel-stats?handle=${(await emulator.catalog()).instagram.handles[0]}`;
    await emulator.call(path);
    await emulator.admin('clock', { advance_seconds: 11 * 3600 });
    expect((await emulator.call(path)).headers['x-cache']).toBe('HIT');
    await emulator.admin('clock', { advance_seconds: 3600 + 1 });
    expect((await emulator.call(path)).headers['x-cache']).toBe('MISS');
  });

  it('a cached download record still signs a new media_url each time, which answers 410 once expired', async () => {
    const reels = await emulator.call<{ data: { url: string }[] }>(`/instagram/channel-reels?handle=${(await emulator.catalog()).instagram.handles[0]}&limit=1`);
    const path = `/instagram/download?url=${q(reels.json.data[0]!.url)}`;
    const first = await emulator.call<{ data: { media_url: string; expires_at: string } }>(path);
    await emulator.admin('clock', { advance_seconds: 60 });
    const second = await emulator.call<{ data: { media_url: string; expires_at: string } }>(path);
    expect(second.headers['x-cache']).toBe('HIT');
    expect(second.headers['x-credits-charged']).toBe('40');
    expect(second.json.data.media_url).not.toBe(first.json.data.media_url);
    expect(Date.parse(second.json.data.expires_at)).toBeGreaterThan(Date.parse(first.json.data.expires_at));
    await emulator.admin('clock', { advance_seconds: 3570 });
    expect((await fetch(first.json.data.media_url)).status).toBe(410);
    expect((await fetch(second.json.data.media_url)).status).toBe(200);
    const tampered = second.json.data.media_url.slice(0, -1) + (second.json.data.media_url.endsWith('A') ? 'B' : 'A');
    expect((await fetch(tampered)).status).toBe(404);
  });
});

describe('the API clock', () => {
  it("the Date header is the emulated clock, which moves with POST /_emulator/clock", async () => {
    const emulator = await startTestEmulator();
    try {
      const before = Date.parse(String((await emulator.call('/webhooks')).headers.date));
      expect(Math.abs(before - Date.now())).toBeLessThan(2_000);
      await emulator.admin('clock', { advance_seconds: 86_400 });
      const after = Date.parse(String((await emulator.call('/webhooks')).headers.date));
      expect(after - before).toBeGreaterThanOrEqual(86_400_000 - 1_000);
    } finally {
      await emulator.close();
    }
  });
});
