import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { q, startTestEmulator, type TestEmulator } from '../support/emulator.js';

type Page = { data: { id: string; posted_at: string }[]; meta: { count: number; limit: number; cursor?: string; has_more: boolean } };

let emulator: TestEmulator;

beforeEach(async () => {
  emulator = await startTestEmulator({ cursorTtlSeconds: 600 });
});
afterEach(() => emulator.close());

/** Follows cursors to the end, varying the page size, and returns every id in order. */
async function pageThrough(path: string, limits: number[], maxPages = 500): Promise<{ ids: string[]; pages: number; times: number[] }> {
  const ids: string[] = [];
  const times: number[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const limit = limits[pages % limits.length]!;
    const result = await emulator.call<Page>(`${path}&limit=${limit}${cursor ? `&cursor=${q(cursor)}` : ''}`);
    expect(result.status, result.text).toBe(200);
    expect(result.json.meta.count).toBe(result.json.data.length);
    expect(result.json.meta.limit).toBe(limit);
    ids.push(...result.json.data.map((item) => item.id));
    times.push(...result.json.data.map((item) => Date.parse(item.posted_at)));
    cursor = result.json.meta.has_more ? result.json.meta.cursor : undefined;
    if (result.json.meta.has_more) expect(cursor).toBeTruthy();
    pages++;
  } while (cursor && pages < maxPages);
  return { ids, pages, times };
}

describe('pagination', () => {
  it('a channel list pages to the end with no item duplicated or missing, newest first', async () => {
    const handle = (await emulator.catalog()).instagram.handles[3]!;
    const profile = await emulator.call<{ data: { metrics: { posts: number } } }>(`/instagram/channel-stats?handle=${handle}`);
    const { ids, times } = await pageThrough(`/instagram/channel-posts?handle=${handle}`, [50, 17, 50, 3]);
    const reels = await pageThrough(`/instagram/channel-reels?handle=${handle}`, [50]);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length + reels.ids.length).toBe(profile.json.data.metrics.posts);
    expect(ids.length).toBeGreaterThanOrEqual(500);
    expect(times).toEqual([...times].sort((a, b) => b - a));
  });

  it('new items posted while paging do not shift pages: the cursor continues where it was, new items go on top', async () => {
    const patient = await startTestEmulator({ cursorTtlSeconds: 10 * 86_400 });
    try {
      const handle = (await patient.catalog()).tiktok.handles[4]!;
      const before = (await patient.call<Page>(`/tiktok/channel-videos?handle=${handle}&limit=20`)).json.data.map((item) => item.id);
      const first = await patient.call<Page>(`/tiktok/channel-videos?handle=${handle}&limit=10&fresh=true`);
      await patient.admin('clock', { advance_seconds: 2 * 86_400 });
      const second = await patient.call<Page>(`/tiktok/channel-videos?handle=${handle}&limit=10&cursor=${q(first.json.meta.cursor!)}`);
      expect([...first.json.data, ...second.json.data].map((item) => item.id)).toEqual(before);
      const top = await patient.call<Page>(`/tiktok/channel-videos?handle=${handle}&limit=50&fresh=true`);
      const at = top.json.data.findIndex((item) => item.id === before[0]);
      // Every account posts at least once a day, so two days bring at least two new items.
      expect(at).toBeGreaterThanOrEqual(2);
      expect(top.json.data.slice(at, at + 20).map((item) => item.id)).toEqual(before.slice(0, Math.min(20, 50 - at)));
    } finally {
      await patient.close();
    }
  });

  it('a search pages to the end of at least 500 results with no duplicate, newest first', async () => {
    const query = (await emulator.catalog()).tiktok.queries[1]!;
    const { ids, times } = await pageThrough(`/tiktok/search?query=${q(query)}`, [50], 30);
    expect(ids.length).toBeGreaterThanOrEqual(500);
    expect(new Set(ids).size).toBe(ids.length);
    expect(times).toEqual([...times].sort((a, b) => b - a));
  });

  it('comments page to the end and their count matches the stats', async () => {
    const handle = (await emulator.catalog()).tiktok.handles[5]!;
    const videos = await emulator.call<{ data: { url: string; metrics: { comments: number } }[] }>(`/tiktok/channel-videos?handle=${handle}&limit=50`);
    const video = videos.json.data.find((item) => item.metrics.comments > 120 && item.metrics.comments < 2000);
    expect(video, 'a video with a few hundred comments').toBeDefined();
    const { ids } = await pageThrough(`/tiktok/comments?url=${q(video!.url)}`, [50, 33]);
    expect(ids.length).toBe(video!.metrics.comments);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('limit may change from page to page', async () => {
    const handle = (await emulator.catalog()).tiktok.handles[6]!;
    const oneGo = await emulator.call<Page>(`/tiktok/channel-videos?handle=${handle}&limit=30`);
    const { ids } = await pageThrough(`/tiktok/channel-videos?handle=${handle}`, [7, 11, 12], 3);
    expect(ids).toEqual(oneGo.json.data.map((item) => item.id));
  });

  it('the last page says has_more false and carries no cursor', async () => {
    const handle = (await emulator.catalog()).tiktok.handles[7]!;
    const count = (await emulator.call<{ data: { metrics: { posts: number } } }>(`/tiktok/channel-stats?handle=${handle}`)).json.data.metrics.posts;
    let cursor: string | undefined;
    let seen = 0;
    let last: Page | undefined;
    while (seen < count) {
      last = (await emulator.call<Page>(`/tiktok/channel-videos?handle=${handle}&limit=50${cursor ? `&cursor=${q(cursor)}` : ''}`)).json;
      seen += last.data.length;
      cursor = last.meta.cursor;
    }
    expect(seen).toBe(count);
    expect(last!.meta.has_more).toBe(false);
    expect(last!.meta.cursor).toBeUndefined();
  });
});

describe('cursors', () => {
  async function firstCursor(handle: string): Promise<string> {
    return (await emulator.call<Page>(`/tiktok/channel-videos?handle=${handle}&limit=5`)).json.meta.cursor!;
  }

  it('a cursor altered by any single character is rejected as invalid_cursor, and nothing is charged', async () => {
    const handle = (await emulator.catalog()).tiktok.handles[0]!;
    const cursor = await firstCursor(handle);
    const ledgerBefore = (await emulator.ledger()).length;
    for (let i = 0; i < cursor.length; i++) {
      const replacement = cursor[i] === 'A' ? 'B' : 'A';
      const altered = cursor.slice(0, i) + replacement + cursor.slice(i + 1);
      const result = await emulator.call<{ error: { code: string } }>(`/tiktok/channel-videos?handle=${handle}&limit=5&cursor=${q(altered)}`);
      expect(result.status, `position ${i}`).toBe(400);
      expect(result.json.error.code).toBe('invalid_cursor');
    }
    expect((await emulator.ledger()).length).toBe(ledgerBefore);
  });

  it("another handle's cursor, or another endpoint's, is rejected", async () => {
    const [a, b] = (await emulator.catalog()).tiktok.handles;
    const cursor = await firstCursor(a!);
    const other = await emulator.call<{ error: { code: string } }>(`/tiktok/channel-videos?handle=${b}&cursor=${q(cursor)}`);
    expect([other.status, other.json.error.code]).toEqual([400, 'invalid_cursor']);
    const search = await emulator.call<{ error: { code: string } }>(`/tiktok/search?query=${a}&cursor=${q(cursor)}`);
    expect([search.status, search.json.error.code]).toEqual([400, 'invalid_cursor']);
  });

  it('a cursor expires after --cursor-ttl seconds with its own code, cursor_expired', async () => {
    const handle = (await emulator.catalog()).tiktok.handles[1]!;
    const cursor = await firstCursor(handle);
    await emulator.admin('clock', { advance_seconds: 590 });
    expect((await emulator.call(`/tiktok/channel-videos?handle=${handle}&limit=5&cursor=${q(cursor)}`)).status).toBe(200);
    await emulator.admin('clock', { advance_seconds: 20 });
    const expired = await emulator.call<{ error: { code: string; param: string } }>(`/tiktok/channel-videos?handle=${handle}&limit=5&cursor=${q(cursor)}`);
    expect(expired.status).toBe(400);
    expect(expired.json.error).toMatchObject({ code: 'cursor_expired', param: 'cursor' });
    expect(expired.headers['x-credits-charged']).toBe('0');
  });

  it('a cached page hands out a cursor that is valid again, not the expired one it first carried', async () => {
    const handle = (await emulator.catalog()).tiktok.handles[2]!;
    await firstCursor(handle);
    await emulator.admin('clock', { advance_seconds: 900 });
    const cached = await emulator.call<Page>(`/tiktok/channel-videos?handle=${handle}&limit=5`);
    expect(cached.headers['x-cache']).toBe('HIT');
    expect((await emulator.call(`/tiktok/channel-videos?handle=${handle}&limit=5&cursor=${q(cached.json.meta.cursor!)}`)).status).toBe(200);
  });
});
