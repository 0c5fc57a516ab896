/** A token bucket per key: refilled at `ratePerSecond`, holding at most that many (at least 1). */
export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the bucket is full again. */
  resetSeconds: number;
  /** Seconds until one request is allowed again (on a refusal). */
  retryAfterSeconds: number;
}

export class RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; atMs: number }>();

  constructor(public ratePerSecond: number) {}

  take(key: string, nowMs: number): RateDecision {
    const rate = this.ratePerSecond;
    const capacity = Math.max(1, rate);
    const bucket = this.buckets.get(key) ?? { tokens: capacity, atMs: nowMs };
    bucket.tokens = Math.min(capacity, bucket.tokens + ((nowMs - bucket.atMs) / 1000) * rate);
    bucket.atMs = nowMs;
    this.buckets.set(key, bucket);
    const allowed = bucket.tokens >= 1;
    if (allowed) bucket.tokens -= 1;
    return {
      allowed,
      limit: capacity,
      remaining: Math.floor(bucket.tokens),
      resetSeconds: Math.ceil((capacity - bucket.tokens) / rate),
      retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil((1 - bucket.tokens) / rate)),
    };
  }
}
