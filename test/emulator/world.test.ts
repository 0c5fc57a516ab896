import { afterEach, describe, expect, it } from 'vitest';
import { World } from '../../src/emulator/world/world.js';
import { q, startTestEmulator, type TestEmulator } from '../support/emulator.js';

const started: TestEmulator[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((emulator) => emulator.close()));
});
async function emulatorWithSeed(seed: number) {
  const emulator = await startTestEmulator({ seed });
  started.push(emulator);
  return emulator;
}

describe('a deterministic world', () => {
  it('the same seed gives the same world; another seed gives another', async () => {
    const [a, b, c] = await Promise.all([emulatorWithSeed(7), emulatorWithSeed(7), emulatorWithSeed(8)]);
    const catalogA = await a.catalog();
    expect(await b.catalog()).toEqual(catalogA);
    expect((await c.catalog()).tiktok.handles).not.toEqual(catalogA.tiktok.handles);
    const handle = catalogA.tiktok.handles[3]!;
    type Page = { data: { id: string; url: string; caption: string; posted_at: string }[] };
    const pageA = await a.call<Page>(`/tiktok/channel-videos?handle=${handle}&limit=50`);
    const pageB = await b.call<Page>(`/tiktok/channel-videos?handle=${handle}&limit=50`);
    // Items, captions and posting rhythm are the same; metrics keep growing with real time, and
    // times are relative to each emulator's start, so compare the gaps between posts.
    const shape = (page: Page) => page.data.map((item, index) => ({
      id: item.id,
      url: item.url,
      caption: item.caption,
      gap: index === 0 ? 0 : Date.parse(page.data[index - 1]!.posted_at) - Date.parse(item.posted_at),
    }));
    expect(shape(pageB.json)).toEqual(shape(pageA.json));
    expect(pageA.json.data).toHaveLength(50);
  });

  it('ids and URLs are shaped like the platforms’ real ones', async () => {
    const emulator = await emulatorWithSeed(42);
    const catalog = await emulator.catalog();
    const videos = await emulator.call<{ data: { id: string; url: string }[] }>(`/tiktok/channel-videos?handle=${catalog.tiktok.handles[0]}&limit=5`);
    for (const video of videos.json.data) {
      expect(video.id).toMatch(/^\d{19}$/);
      expect(video.url).toBe(`https://www.tiktok.com/@${catalog.tiktok.handles[0]}/video/${video.id}`);
    }
    const reels = await emulator.call<{ data: { url: string }[] }>(`/instagram/channel-reels?handle=${catalog.instagram.handles[0]}&limit=5`);
    const posts = await emulator.call<{ data: { url: string }[] }>(`/instagram/channel-posts?handle=${catalog.instagram.handles[0]}&limit=5`);
    for (const reel of reels.json.data) expect(reel.url).toMatch(/^https:\/\/www\.instagram\.com\/reel\/[A-Za-z0-9]{11}\/$/);
    for (const post of posts.json.data) expect(post.url).toMatch(/^https:\/\/www\.instagram\.com\/p\/[A-Za-z0-9]{11}\/$/);
  });

  it('the catalog guarantees 500 items of every kind per handle and 500 results per query', async () => {
    const emulator = await emulatorWithSeed(42);
    const catalog = await emulator.catalog();
    for (const handle of catalog.tiktok.handles) {
      const profile = await emulator.call<{ data: { metrics: { posts: number } } }>(`/tiktok/channel-stats?handle=${handle}`);
      expect(profile.json.data.metrics.posts).toBeGreaterThanOrEqual(500);
    }
    // The world is lazy: check every instagram list and every query directly against it, cheaply.
    const world = new World(42, Date.now());
    for (const handle of catalog.instagram.handles) {
      const account = world.accountByHandle('instagram', handle)!;
      expect(world.listCount(account, 'post', Date.now())).toBeGreaterThanOrEqual(500);
      expect(world.listCount(account, 'reel', Date.now())).toBeGreaterThanOrEqual(500);
    }
    for (const query of catalog.tiktok.queries) {
      const search = await emulator.call<{ data: unknown[]; meta: { has_more: boolean } }>(`/tiktok/search?query=${q(query)}&limit=50`);
      expect(search.json.data.length).toBe(50);
      const topic = world.topicOf('hashtag', query)!;
      expect(world.search('tiktok', 'video', topic, Date.now(), undefined, 500).items.length).toBe(500);
      expect(world.search('instagram', 'reel', topic, Date.now(), undefined, 500).items.length).toBe(500);
    }
  });

  it('moving the clock makes new items appear and metrics grow', async () => {
    const emulator = await emulatorWithSeed(42);
    const handle = (await emulator.catalog()).tiktok.handles[0]!;
    type Profile = { data: { metrics: { posts: number; followers: number } } };
    const before = (await emulator.call<Profile>(`/tiktok/channel-stats?handle=${handle}`)).json.data.metrics;
    const newest = (await emulator.call<{ data: { url: string; metrics: { views: number } }[] }>(`/tiktok/channel-videos?handle=${handle}&limit=1`)).json.data[0]!;
    await emulator.admin('clock', { advance_seconds: 3 * 86_400 });
    const after = (await emulator.call<Profile>(`/tiktok/channel-stats?handle=${handle}&fresh=true`)).json.data.metrics;
    expect(after.posts).toBeGreaterThanOrEqual(before.posts + 3);
    expect(after.followers).toBeGreaterThan(before.followers);
    const stats = await emulator.call<{ data: { metrics: { views: number } } }>(`/tiktok/stats?url=${q(newest.url)}&fresh=true`);
    expect(stats.json.data.metrics.views).toBeGreaterThan(newest.metrics.views);
  });

  it('counts are bounded as on the real platforms: comments and likes within views, shares within likes, at every age, for every seed', () => {
    const start = Date.now();
    const breaches: string[] = [];
    let items = 0;
    for (const seed of [1, 42, 20261125]) {
      const world = new World(seed, start);
      for (const [platform, kinds] of [['tiktok', ['video']], ['instagram', ['reel', 'post']]] as const) {
        for (let index = 0; index < 4; index++) {
          const account = world.account(platform, index);
          for (const kind of kinds) {
            for (let k = 0; k < 100; k++) {
              const item = world.item(account, kind, k);
              items++;
              // From its first minute to a month old (and as old as the catalog makes it).
              for (const ageMs of [60_000, 3_600_000, 6 * 3_600_000, 86_400_000, 3 * 86_400_000, 30 * 86_400_000, Math.max(0, start - item.postedAtMs)]) {
                const { views, likes, comments, shares } = world.metrics(item, item.postedAtMs + ageMs);
                const at = `seed ${seed} ${platform} ${kind} ${k} at ${ageMs} ms`;
                if (kind === 'post') {
                  // Photo posts count no views: their comments are bounded by their likes.
                  if (views !== 0 || comments > likes || shares > likes) breaches.push(`${at}: ${views} views, ${likes} likes, ${comments} comments, ${shares} shares`);
                } else if (comments > views || likes > views || shares > likes) {
                  breaches.push(`${at}: ${views} views, ${likes} likes, ${comments} comments, ${shares} shares`);
                }
              }
            }
          }
        }
      }
    }
    expect(items).toBe(3 * (4 * 100 + 4 * 200));
    expect(breaches.slice(0, 5)).toEqual([]);
    // Deterministic: the same seed, the same counts.
    const [a, b] = [new World(7, start), new World(7, start)];
    const item = (world: World) => world.item(world.account('tiktok', 3), 'video', 12);
    expect(a.metrics(item(a), start)).toEqual(b.metrics(item(b), start));
  });

  it('comments number from zero to tens of thousands across items', () => {
    const world = new World(42, Date.now());
    const account = world.account('tiktok', 0);
    const counts = Array.from({ length: 400 }, (_, k) => world.commentCount(world.item(account, 'video', k), Date.now()));
    expect(Math.min(...counts)).toBe(0);
    expect(Math.max(...counts)).toBeGreaterThan(10_000);
  });
});
