import type { CachePolicy } from '../api-catalog/endpoints.js';

/**
 * The API's server-side result cache. Entries are keyed by endpoint and request, kept for the
 * endpoint's policy, and bounded in number so a long emulator run keeps flat memory.
 */
export class ResponseCache<V> {
  private readonly entries = new Map<string, { expiresAtMs: number; value: V }>();

  constructor(private readonly maxEntries = 200_000) {}

  get(key: string, nowMs: number): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAtMs <= nowMs) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  set(key: string, value: V, ttlMs: number, nowMs: number): void {
    if (this.entries.size >= this.maxEntries) {
      // Maps iterate in insertion order, so the first key is the oldest entry.
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.set(key, { expiresAtMs: nowMs + ttlMs, value });
  }
}

/**
 * How long an answer stays cached. Age-aware answers about content of age A are kept A/4,
 * clamped to the policy's bounds: a video posted an hour ago is re-read within 15 minutes, one
 * posted a month ago is kept 7 days. Page 1 of a list is kept a third as long as deeper pages
 * (the spec's pagination rule 5; for channel lists the table gives 1 hour against 3), never
 * below the policy's minimum.
 */
export function cacheTtlMs(policy: CachePolicy, contentAgeMs: number, isFirstPage: boolean): number {
  switch (policy.kind) {
    case 'forever':
      return Number.POSITIVE_INFINITY;
    case 'fixed':
      return (isFirstPage && policy.firstPageSeconds !== undefined ? policy.firstPageSeconds : policy.seconds) * 1000;
    case 'age-aware': {
      const ttl = Math.min(policy.maxSeconds * 1000, Math.max(policy.minSeconds * 1000, contentAgeMs / 4));
      return isFirstPage ? Math.max(policy.minSeconds * 1000, ttl / 3) : ttl;
    }
  }
}
