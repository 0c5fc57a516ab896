/**
 * What each content endpoint answers, computed from the world: resolving the request's
 * identifying parameter, and building the spec's data objects and list items.
 */
import { listedItemKind, type EndpointSpec } from '../api-catalog/endpoints.js';
import { ApiError, invalidParameter, missingParameter } from './api-error.js';
import { isoSeconds } from './clock.js';
import type { Account, Item, SearchBoundary, World } from './world/world.js';

export type Target =
  | { kind: 'item'; item: Item }
  | { kind: 'account'; account: Account }
  | { kind: 'query'; topic: string | undefined };

/** Where a list resumes: an item index (channel lists, comments) or a search boundary. */
export type ListPosition = number | SearchBoundary;

export interface ObjectAnswer {
  data: Record<string, unknown>;
  contentAgeMs: number;
}

export interface ListAnswer {
  items: Record<string, unknown>[];
  next: ListPosition | undefined;
  hasMore: boolean;
  contentAgeMs: number;
}

export class ContentProducer {
  constructor(private readonly world: World) {}

  /** Turns the identifying parameter into what the endpoint is about, or throws a 400/404. */
  resolve(spec: EndpointSpec, value: string | null, nowMs: number): Target {
    if (value === null || value === '') throw missingParameter(spec.param);
    if (spec.param === 'handle') {
      if (value.startsWith('@')) throw invalidParameter('handle', `handle must be given without a leading @, got ${JSON.stringify(value)}`);
      const account = this.world.accountByHandle(spec.platform, value);
      if (!account) throw new ApiError(404, 'handle_not_found', `no ${spec.platform} account with handle ${JSON.stringify(value)}`, 'handle');
      return { kind: 'account', account };
    }
    if (spec.param === 'query') {
      return { kind: 'query', topic: this.world.topicOf(spec.name === 'hashtag-search' ? 'hashtag' : 'keyword', value) };
    }
    const lookup = this.world.itemByUrl(spec.platform, value, nowMs);
    if ('invalid' in lookup) throw invalidParameter('url', `not a ${spec.platform} content URL: ${lookup.invalid}`);
    if ('missing' in lookup) throw new ApiError(404, 'content_not_found', lookup.missing, 'url');
    const item = lookup.found;
    if ((spec.name === 'transcript' || spec.name === 'summary') && item.kind === 'post') {
      throw new ApiError(400, 'unsupported_content', `${spec.name} needs audio, and an Instagram photo post (/p/) has none`, 'url');
    }
    return { kind: 'item', item };
  }

  object(spec: EndpointSpec, target: Target, nowMs: number): ObjectAnswer {
    if (target.kind === 'account') {
      const { account } = target;
      const metrics = this.world.profile(account, nowMs);
      return {
        data: { platform: account.platform, handle: account.handle, name: account.name, bio: account.bio, verified: account.verified, metrics },
        contentAgeMs: 0,
      };
    }
    if (target.kind !== 'item') throw new Error(`${spec.name} takes a content URL`);
    const { item } = target;
    const base = { platform: item.platform, entity_id: item.id };
    const contentAgeMs = nowMs - item.postedAtMs;
    switch (spec.name) {
      case 'transcript': {
        const transcript = this.world.transcript(item);
        const source = item.platform === 'tiktok' ? 'subtitles' : 'audio';
        return { data: { ...base, language: transcript.language, source, text: transcript.text, segments: transcript.segments }, contentAgeMs };
      }
      case 'summary':
        return { data: { ...base, ...this.world.summary(item) }, contentAgeMs };
      case 'stats':
        return {
          data: {
            ...base,
            url: item.url,
            author: { handle: item.account.handle, name: item.account.name },
            posted_at: isoSeconds(item.postedAtMs),
            metrics: this.world.metrics(item, nowMs),
          },
          contentAgeMs,
        };
      case 'download':
        // The record is what gets cached; each answer signs its own short-lived media_url.
        return { data: { ...base, mime_type: item.kind === 'post' ? 'image/jpeg' : 'video/mp4' }, contentAgeMs };
      default:
        throw new Error(`${spec.name} is not an object endpoint`);
    }
  }

  list(spec: EndpointSpec, target: Target, position: ListPosition | undefined, limit: number, nowMs: number): ListAnswer {
    if (spec.name === 'comments') {
      if (target.kind !== 'item') throw new Error('comments take a content URL');
      const { item } = target;
      const page = this.world.commentPage(item, nowMs, position as number | undefined, limit);
      return {
        items: page.comments.map(({ comment }) => ({
          id: comment.id,
          text: comment.text,
          author: { handle: comment.authorHandle },
          likes: comment.likes,
          posted_at: isoSeconds(comment.postedAtMs),
        })),
        next: page.comments.at(-1)?.j,
        hasMore: page.hasMore,
        contentAgeMs: nowMs - item.postedAtMs,
      };
    }
    const kind = listedItemKind(spec);
    if (!kind) throw new Error(`${spec.platform}/${spec.name} is not a list endpoint`);
    if (target.kind === 'account') {
      const page = this.world.listPage(target.account, kind, nowMs, position as number | undefined, limit);
      return {
        items: page.items.map((item) => this.channelItem(item, nowMs)),
        next: page.items.at(-1)?.k,
        hasMore: page.hasMore,
        contentAgeMs: 0,
      };
    }
    if (target.kind !== 'query') throw new Error(`${spec.name} takes a query`);
    if (target.topic === undefined) return { items: [], next: undefined, hasMore: false, contentAgeMs: 0 };
    const page = this.world.search(spec.platform, kind, target.topic, nowMs, position as SearchBoundary | undefined, limit);
    const last = page.items.at(-1);
    const newest = page.items[0];
    return {
      items: page.items.map((item) => this.searchResult(item, nowMs)),
      next: last ? { t: last.postedAtMs, id: last.id } : undefined,
      hasMore: page.hasMore,
      contentAgeMs: newest ? nowMs - newest.postedAtMs : 0,
    };
  }

  private channelItem(item: Item, nowMs: number): Record<string, unknown> {
    const { views, likes, comments } = this.world.metrics(item, nowMs);
    return {
      id: item.id,
      url: item.url,
      caption: item.caption,
      posted_at: isoSeconds(item.postedAtMs),
      metrics: item.kind === 'post' ? { likes, comments } : { views, likes, comments },
    };
  }

  private searchResult(item: Item, nowMs: number): Record<string, unknown> {
    const { views, likes } = this.world.metrics(item, nowMs);
    return {
      id: item.id,
      url: item.url,
      caption: item.caption,
      author: { handle: item.account.handle },
      metrics: { views, likes },
      posted_at: isoSeconds(item.postedAtMs),
    };
  }
}
