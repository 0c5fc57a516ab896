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

export function parseContentUrl(platform: Platform, url: string): ContentRef | undefined {
  if (platform === 'tiktok') {
    const match = /^https:\/\/(?:www\.)?tiktok\.com\/@[A-Za-z0-9_.]+\/video\/(\d+)/.exec(url);
    return match ? { platform, itemId: match[1] as string, kind: 'video' } : undefined;
  }
  const match = /^https:\/\/(?:www\.)?instagram\.com\/(reel|reels|p)\/([A-Za-z0-9_-]+)/.exec(url);
  return match ? { platform, itemId: match[2] as string, kind: match[1] === 'p' ? 'post' : 'reel' } : undefined;
}
