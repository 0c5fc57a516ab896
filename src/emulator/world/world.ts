/**
 * The emulator's synthetic world: accounts, their items, comments, transcripts and search, all
 * computed on demand from the seed. Time matters: items are posted on a schedule per account, so
 * moving the emulated clock forward makes new items appear and metrics grow.
 */
import type { ItemKind, Platform } from '../../api-catalog/endpoints.js';
import { hash32, hashDigits, intBetween, logUniform, pick, unit } from './random.js';
import {
  ADJECTIVES,
  CAPTION_CLOSERS,
  CAPTION_OPENERS,
  COMMENT_TEXTS,
  NOUNS,
  TOPICS,
  TRANSCRIPT_SENTENCES,
  hashtagOf,
} from './vocabulary.js';

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
/** How fast an item's views and comments approach their peak. */
const METRICS_GROWTH_MS = 3 * DAY_MS;
const COMMENTS_GROWTH_MS = 1 * DAY_MS;

/** How far an item of this age has come toward its peak: 1 − e^(−age/growthMs). */
function growthAt(item: Item, nowMs: number, growthMs: number): number {
  return 1 - Math.exp(-Math.max(0, nowMs - item.postedAtMs) / growthMs);
}
/** Accounts below this index always have at least this many items of every kind: the catalog's. */
const CATALOG_ACCOUNTS = 12;
const CATALOG_MIN_ITEMS = 600;
/** Item index k is encoded in ids; this bounds it (a million items per list is far beyond the world). */
const MAX_ITEMS_PER_LIST = 1_000_000;

export const LIST_KINDS: Record<Platform, readonly ItemKind[]> = { tiktok: ['video'], instagram: ['post', 'reel'] };

export interface Account {
  platform: Platform;
  index: number;
  handle: string;
  name: string;
  bio: string;
  verified: boolean;
  topics: readonly [string, string];
  followersBase: number;
  following: number;
  lists: Partial<Record<ItemKind, { initialCount: number; intervalMs: number }>>;
}

export interface Item {
  platform: Platform;
  kind: ItemKind;
  account: Account;
  /** Position in the account's list of this kind, 0 being the oldest. */
  k: number;
  id: string;
  url: string;
  topic: string;
  caption: string;
  postedAtMs: number;
}

export interface ItemMetrics {
  views: number;
  likes: number;
  comments: number;
  shares: number;
}

export interface WorldComment {
  id: string;
  text: string;
  authorHandle: string;
  likes: number;
  postedAtMs: number;
}

/** What a content URL resolves to. `invalid` means it is not a URL of that platform at all. */
export type UrlLookup = { found: Item } | { invalid: string } | { missing: string };

/** Position in a search listing: results strictly older than this (time, then id) come next. */
export interface SearchBoundary {
  t: number;
  id: string;
}

export type SearchMode = 'keyword' | 'hashtag';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

export class World {
  readonly accountsPerPlatform: number;
  private readonly accounts = new Map<string, Account>();
  private readonly topicAccounts = new Map<string, Account[]>();

  constructor(
    readonly seed: number,
    /** Emulated time at which the world "is now": initial item counts hold at this instant. */
    readonly startMs: number,
    accountsPerPlatform = 5_000,
  ) {
    this.accountsPerPlatform = accountsPerPlatform;
  }

  // ---- accounts -------------------------------------------------------------------------------

  account(platform: Platform, index: number): Account {
    const cacheKey = `${platform}:${index}`;
    const cached = this.accounts.get(cacheKey);
    if (cached) return cached;
    const s = this.seed;
    const adjective = pick(ADJECTIVES, s, platform, 'adj', index);
    const noun = pick(NOUNS, s, platform, 'noun', index);
    const first = hash32(s, platform, 'topic1', index) % TOPICS.length;
    const second = (first + 1 + (hash32(s, platform, 'topic2', index) % (TOPICS.length - 1))) % TOPICS.length;
    const topics = [TOPICS[first], TOPICS[second]] as [string, string];
    const lists: Account['lists'] = {};
    for (const kind of LIST_KINDS[platform]) {
      const minimum = index < CATALOG_ACCOUNTS ? CATALOG_MIN_ITEMS : 150;
      lists[kind] = {
        initialCount: Math.floor(logUniform(minimum, 3_000, unit(s, platform, kind, 'count', index))),
        intervalMs: intBetween(1, 24, s, platform, kind, 'interval', index) * HOUR_MS,
      };
    }
    const account: Account = {
      platform,
      index,
      handle: `${adjective}_${noun}${index}`,
      name: `${capitalize(adjective)} ${capitalize(noun)}`,
      bio: `${capitalize(topics[0])} and ${topics[1]}, every week. Collabs in DMs.`,
      verified: unit(s, platform, 'verified', index) < 0.1,
      topics,
      followersBase: Math.floor(logUniform(50, 5_000_000, unit(s, platform, 'followers', index))),
      following: intBetween(0, 2_000, s, platform, 'following', index),
      lists,
    };
    this.accounts.set(cacheKey, account);
    return account;
  }

  accountByHandle(platform: Platform, handle: string): Account | undefined {
    const match = /^[a-z]+_[a-z]+?(\d+)$/.exec(handle);
    if (!match) return undefined;
    const index = Number(match[1]);
    if (index >= this.accountsPerPlatform) return undefined;
    const account = this.account(platform, index);
    return account.handle === handle ? account : undefined;
  }

  /** Handles and queries that are guaranteed to have at least 500 items or results. */
  catalog(): Record<Platform, { handles: string[]; queries: string[] }> {
    const handles = (platform: Platform) =>
      Array.from({ length: CATALOG_ACCOUNTS }, (_, index) => this.account(platform, index).handle);
    const queries = TOPICS.filter((_, i) => i % 4 === 0);
    return {
      tiktok: { handles: handles('tiktok'), queries: [...queries] },
      instagram: { handles: handles('instagram'), queries: [...queries] },
    };
  }

  profile(account: Account, nowMs: number) {
    const daysSinceStart = Math.max(0, (nowMs - this.startMs) / DAY_MS);
    const posts = LIST_KINDS[account.platform].reduce((sum, kind) => sum + this.listCount(account, kind, nowMs), 0);
    return {
      followers: account.followersBase + Math.floor(account.followersBase * 0.002 * daysSinceStart),
      following: account.following,
      posts,
    };
  }

  // ---- items ----------------------------------------------------------------------------------

  /** How many items of a kind the account has posted by `nowMs`. */
  listCount(account: Account, kind: ItemKind, nowMs: number): number {
    const list = account.lists[kind];
    if (!list) return 0;
    // Item k is posted at start + (k + 0.5 - initialCount) * interval, so exactly initialCount
    // exist at start and the next one appears half an interval (at least 30 minutes) later.
    const count = Math.floor((nowMs - this.startMs) / list.intervalMs + list.initialCount + 0.5);
    return Math.max(0, Math.min(count, MAX_ITEMS_PER_LIST));
  }

  item(account: Account, kind: ItemKind, k: number): Item {
    const list = account.lists[kind];
    if (!list) throw new Error(`${account.platform} accounts have no ${kind} list`);
    const s = this.seed;
    const topic = account.topics[hash32(s, account.platform, kind, 'topic', account.index, k) % 2] as string;
    const id = this.itemId(account, kind, k);
    const caption = `${pick(CAPTION_OPENERS, s, 'open', id)} ${topic}, ${pick(CAPTION_CLOSERS, s, 'close', id)} #${hashtagOf(topic)}`;
    return {
      platform: account.platform,
      kind,
      account,
      k,
      id,
      url: this.itemUrl(account, kind, id),
      topic,
      caption,
      postedAtMs: this.startMs + (k + 0.5 - list.initialCount) * list.intervalMs,
    };
  }

  private itemId(account: Account, kind: ItemKind, k: number): string {
    if (account.platform === 'tiktok') {
      // 19 digits like TikTok's: '7', 12 digits of hash, then k, so the id can be checked on lookup.
      return `7${hashDigits(12, this.seed, 'video', account.index, k)}${String(k).padStart(6, '0')}`;
    }
    // Instagram shortcodes: base62 of (account, k) and a checksum, so they resolve without a handle.
    const checksum = BigInt(hash32(this.seed, 'shortcode', kind, account.index, k) & 0xffffff);
    let value = ((BigInt(account.index) << 20n) | BigInt(k)) << 24n | checksum;
    let code = '';
    for (let i = 0; i < 10; i++) {
      code = BASE62[Number(value % 62n)] + code;
      value /= 62n;
    }
    return `${kind === 'reel' ? 'C' : 'B'}${code}`;
  }

  private itemUrl(account: Account, kind: ItemKind, id: string): string {
    if (account.platform === 'tiktok') return `https://www.tiktok.com/@${account.handle}/video/${id}`;
    return `https://www.instagram.com/${kind === 'reel' ? 'reel' : 'p'}/${id}/`;
  }

  /** Resolves a content URL to a posted item of the platform. */
  itemByUrl(platform: Platform, url: string, nowMs: number): UrlLookup {
    if (platform === 'tiktok') {
      const match = /^https:\/\/(?:www\.)?tiktok\.com\/@([A-Za-z0-9_.]+)\/video\/(\d{19})\/?(?:\?.*)?$/.exec(url);
      if (!match) return { invalid: 'expected a TikTok video URL like https://www.tiktok.com/@handle/video/<19 digits>' };
      const [, handle, id] = match as unknown as [string, string, string];
      const account = this.accountByHandle('tiktok', handle);
      const k = Number(id.slice(13));
      if (!account || this.itemId(account, 'video', k) !== id || k >= this.listCount(account, 'video', nowMs)) {
        return { missing: `no TikTok video ${id} by @${handle}` };
      }
      return { found: this.item(account, 'video', k) };
    }
    const match = /^https:\/\/(?:www\.)?instagram\.com\/(reel|reels|p)\/([A-Za-z0-9]{11})\/?(?:\?.*)?$/.exec(url);
    if (!match) return { invalid: 'expected an Instagram URL like https://www.instagram.com/reel/<shortcode>/ or /p/<shortcode>/' };
    const [, path, code] = match as unknown as [string, string, string];
    const kind: ItemKind = path === 'p' ? 'post' : 'reel';
    let value = 0n;
    for (const char of code.slice(1)) value = value * 62n + BigInt(BASE62.indexOf(char));
    const index = Number(value >> 44n);
    const k = Number((value >> 24n) & 0xfffffn);
    if (index >= this.accountsPerPlatform) return { missing: `no Instagram ${kind} ${code}` };
    const account = this.account('instagram', index);
    if (this.itemId(account, kind, k) !== code || k >= this.listCount(account, kind, nowMs)) {
      return { missing: `no Instagram ${kind} ${code}` };
    }
    return { found: this.item(account, kind, k) };
  }

  /** Items of a list, newest first, starting below position `beforeK` (exclusive). */
  listPage(account: Account, kind: ItemKind, nowMs: number, beforeK: number | undefined, limit: number) {
    const count = this.listCount(account, kind, nowMs);
    const top = Math.min(beforeK ?? count, count) - 1;
    const items: Item[] = [];
    for (let k = top; k >= 0 && items.length < limit; k--) items.push(this.item(account, kind, k));
    const last = items.at(-1);
    return { items, hasMore: last !== undefined && last.k > 0 };
  }

  /**
   * An item's counts at `nowMs`, bounded as on the real platforms (docs/api.md, "Content"): likes
   * 2–12 % of views, shares 1–10 % of likes, comments at most a few percent of views (of likes, for
   * photo posts, which count no views). Comments grow faster than views (a day against three), so
   * a young item's share of comments runs up to three times its lifetime rate, still far below its
   * views.
   */
  metrics(item: Item, nowMs: number): ItemMetrics {
    const s = this.seed;
    const growth = growthAt(item, nowMs, METRICS_GROWTH_MS);
    const comments = this.commentCount(item, nowMs);
    if (item.kind === 'post') {
      const likes = Math.floor(this.peakLikes(item) * growth);
      return { views: 0, likes, comments, shares: Math.floor(likes * 0.02) };
    }
    const views = Math.floor(this.peakViews(item) * growth);
    const likes = Math.floor(views * (0.02 + 0.1 * unit(s, 'like-rate', item.id)));
    const shares = Math.floor(likes * (0.01 + 0.09 * unit(s, 'share-rate', item.id)));
    return { views, likes, comments, shares };
  }

  /** The views a video or reel approaches: log-uniform 100–5,000,000. */
  private peakViews(item: Item): number {
    return logUniform(100, 5_000_000, unit(this.seed, 'views', item.id));
  }

  /** The likes a photo post approaches: log-uniform 10–200,000. */
  private peakLikes(item: Item): number {
    return logUniform(10, 200_000, unit(this.seed, 'likes', item.id));
  }

  /** The likes an item approaches, as `metrics` counts them at their peak. */
  private itemLikesAtPeak(item: Item): number {
    if (item.kind === 'post') return this.peakLikes(item);
    return this.peakViews(item) * (0.02 + 0.1 * unit(this.seed, 'like-rate', item.id));
  }

  // ---- comments -------------------------------------------------------------------------------

  /**
   * The comments an item has over its life: 0.05–1 % of its peak views (log-uniform), or for a
   * photo post, 0.5–5 % of its peak likes. Tied to them, not drawn apart (as it was, 76 of 412
   * items had more comments than views: 3,024 on 5 views).
   */
  private commentCeiling(item: Item): number {
    const rate = unit(this.seed, 'comment-rate', item.id);
    if (item.kind === 'post') return Math.floor(this.peakLikes(item) * logUniform(0.005, 0.05, rate));
    return Math.floor(this.peakViews(item) * logUniform(0.0005, 0.01, rate));
  }

  /** Comments visible at `nowMs`: comment j appears once the item's comment curve passes it. */
  commentCount(item: Item, nowMs: number): number {
    const ceiling = this.commentCeiling(item);
    return Math.min(ceiling, Math.floor(ceiling * growthAt(item, nowMs, COMMENTS_GROWTH_MS) + 0.5));
  }

  comment(item: Item, j: number): WorldComment {
    const s = this.seed;
    const ceiling = this.commentCeiling(item);
    const ageMs = -COMMENTS_GROWTH_MS * Math.log(1 - (j + 0.5) / ceiling);
    const authorIndex = hash32(s, 'comment-author', item.id, j) % this.accountsPerPlatform;
    const prefix = item.platform === 'tiktok' ? '7' : '18';
    return {
      id: `${prefix}${hashDigits(12, s, 'comment', item.id)}${String(j).padStart(5, '0')}`,
      text: pick(COMMENT_TEXTS, s, 'comment-text', item.id, j),
      authorHandle: this.account(item.platform, authorIndex).handle,
      // Up to a tenth of the item's own likes: a comment is liked less than what it is under.
      likes: Math.floor(logUniform(1, 1 + this.itemLikesAtPeak(item) / 10, unit(s, 'comment-likes', item.id, j))) - 1,
      postedAtMs: Math.floor(item.postedAtMs + ageMs),
    };
  }

  /** Comments newest first, below index `beforeJ` (exclusive). */
  commentPage(item: Item, nowMs: number, beforeJ: number | undefined, limit: number) {
    const count = this.commentCount(item, nowMs);
    const top = Math.min(beforeJ ?? count, count) - 1;
    const comments: { j: number; comment: WorldComment }[] = [];
    for (let j = top; j >= 0 && comments.length < limit; j--) comments.push({ j, comment: this.comment(item, j) });
    const last = comments.at(-1);
    return { comments, hasMore: last !== undefined && last.j > 0 };
  }

  // ---- search ---------------------------------------------------------------------------------

  /** The topic a query names, or undefined: search finds topic words, hashtag-search their hashtags. */
  topicOf(mode: SearchMode, query: string): string | undefined {
    const normalized = query.trim().toLowerCase().replace(/\s+/g, ' ');
    if (mode === 'keyword') return TOPICS.find((topic) => topic === normalized);
    const tag = normalized.replace(/^#/, '').replace(/\s+/g, '');
    return TOPICS.find((topic) => hashtagOf(topic) === tag);
  }

  private accountsWithTopic(platform: Platform, topic: string): Account[] {
    const cacheKey = `${platform}:${topic}`;
    let found = this.topicAccounts.get(cacheKey);
    if (!found) {
      found = [];
      for (let index = 0; index < this.accountsPerPlatform; index++) {
        const account = this.account(platform, index);
        if (account.topics.includes(topic)) found.push(account);
      }
      this.topicAccounts.set(cacheKey, found);
    }
    return found;
  }

  /**
   * One page of search results, newest first across every account that posts on the topic:
   * a k-way merge of each account's matching items, resumed from a (time, id) boundary so that
   * items posted meanwhile never shift a page.
   */
  search(platform: Platform, kind: ItemKind, topic: string, nowMs: number, boundary: SearchBoundary | undefined, limit: number) {
    const heads: { account: Account; next: Item | undefined }[] = [];
    for (const account of this.accountsWithTopic(platform, topic)) {
      const list = account.lists[kind];
      if (!list) continue;
      let k = this.listCount(account, kind, nowMs) - 1;
      if (boundary) {
        k = Math.min(k, Math.floor((boundary.t - this.startMs) / list.intervalMs + list.initialCount - 0.5));
        while (k >= 0) {
          const item = this.item(account, kind, k);
          if (item.postedAtMs < boundary.t || (item.postedAtMs === boundary.t && item.id < boundary.id)) break;
          k--;
        }
      }
      heads.push({ account, next: this.matchingItemAtOrBelow(account, kind, topic, k) });
    }
    const items: Item[] = [];
    while (items.length < limit) {
      let best: (typeof heads)[number] | undefined;
      for (const head of heads) {
        if (head.next && (!best?.next || isNewer(head.next, best.next))) best = head;
      }
      if (!best?.next) break;
      items.push(best.next);
      best.next = this.matchingItemAtOrBelow(best.account, kind, topic, best.next.k - 1);
    }
    return { items, hasMore: heads.some((head) => head.next !== undefined) };
  }

  private matchingItemAtOrBelow(account: Account, kind: ItemKind, topic: string, k: number): Item | undefined {
    for (let at = k; at >= 0; at--) {
      const item = this.item(account, kind, at);
      if (item.topic === topic) return item;
    }
    return undefined;
  }

  // ---- transcripts ----------------------------------------------------------------------------

  transcript(item: Item) {
    const s = this.seed;
    const segmentCount = intBetween(4, 16, s, 'segments', item.id);
    const segments: { start: number; end: number; text: string }[] = [];
    let at = 0;
    for (let i = 0; i < segmentCount; i++) {
      const length = Math.round((2 + 4 * unit(s, 'segment-length', item.id, i)) * 10) / 10;
      const text = pick(TRANSCRIPT_SENTENCES, s, 'sentence', item.id, i).replace('{topic}', item.topic);
      segments.push({ start: Math.round(at * 10) / 10, end: Math.round((at + length) * 10) / 10, text });
      at += length;
    }
    return { language: 'en', segments, text: segments.map((segment) => segment.text).join(' ') };
  }

  /** The summary is derived from the transcript, as the API builds it. */
  summary(item: Item): { language: string; summary: string } {
    const transcript = this.transcript(item);
    const seconds = Math.round(transcript.segments.at(-1)?.end ?? 0);
    const first = transcript.segments[0]?.text ?? '';
    const last = transcript.segments.at(-1)?.text ?? '';
    return {
      language: transcript.language,
      summary: `A ${seconds}-second ${item.kind} about ${item.topic} by @${item.account.handle}. It opens with "${first}" and closes with "${last}"`,
    };
  }
}

function isNewer(a: Item, b: Item): boolean {
  return a.postedAtMs > b.postedAtMs || (a.postedAtMs === b.postedAtMs && a.id > b.id);
}

function capitalize(word: string): string {
  return word.charAt(0).toUpperCase() + word.slice(1);
}
