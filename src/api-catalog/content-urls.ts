import type { ItemKind, Platform } from './endpoints.js';

/**
 * The item a public content URL points at, read from the URL alone: TikTok's 19-digit video id,
 * or Instagram's shortcode and whether it is a reel or a post. The warehouse keys items this way.
 */
export interface ContentRef {
  platform: Platform;
  itemId: string;
  kind: ItemKind;
}

/**
 * One pattern per platform, in a syntax both JavaScript and DuckDB's RE2 accept, so the loader's
 * SQL reads item ids with the very same rule. Group 1 is the path word that gives the kind, group 2
 * the item id.
 */
export const CONTENT_URL_PATTERNS: Record<Platform, string> = {
  tiktok: '^https://(?:www\\.)?tiktok\\.com/@[A-Za-z0-9_.]+/(video)/([0-9]+)',
  instagram: '^https://(?:www\\.)?instagram\\.com/(reel|reels|p)/([A-Za-z0-9_-]+)',
};

/** The item kind each path word of a content URL means. */
export const CONTENT_URL_KINDS: Record<string, ItemKind> = { video: 'video', p: 'post', reel: 'reel', reels: 'reel' };

const CONTENT_URL_REGEXPS = {
  tiktok: new RegExp(CONTENT_URL_PATTERNS.tiktok),
  instagram: new RegExp(CONTENT_URL_PATTERNS.instagram),
};

export function parseContentUrl(platform: Platform, url: string): ContentRef | undefined {
  const match = CONTENT_URL_REGEXPS[platform].exec(url);
  return match ? { platform, itemId: match[2] as string, kind: CONTENT_URL_KINDS[match[1] as string] as ItemKind } : undefined;
}
