import { setTimeout as sleep } from 'node:timers/promises';

/**
 * One gate per client, and so per API key in a worker: every request passes it, so raising
 * concurrency never turns into a storm of 429s. It mirrors the API's token bucket: each answer's
 * X-RateLimit-Limit (tokens per second, and the bucket's size) and X-RateLimit-Remaining, less
 * the requests still in flight that the API may not have counted yet, say how many requests may
 * go at once; beyond that, each waits for its token's refill. A 429 closes the gate for its
 * Retry-After. Before the first answer nothing is known, and nothing is held back.
 * Hand-written: the limit is the server's, learnt from its headers as it goes, which the
 * token-bucket libraries (they count on their own clock, with a rate given up front) do not do.
 */
export class RateGate {
  private limit = 0;
  private tokens = Number.POSITIVE_INFINITY;
  private refilledAtMs = Date.now();
  private inFlight = 0;
  private openAtMs = 0;

  /**
   * Takes a token for a request: undefined when it may go now (no promise to await on the hot
   * path), else a promise of when it may. Every request taken must be ended with `observe`.
   */
  closed(): Promise<void> | undefined {
    const now = Date.now();
    this.refill(now);
    this.inFlight++;
    this.tokens -= 1;
    // A request without a token of its own waits for one to refill, after those before it.
    const waitMs = Math.max(this.openAtMs - now, this.tokens < 0 ? (-this.tokens / this.limit) * 1000 : 0);
    return waitMs > 0 ? sleep(waitMs) : undefined;
  }

  /** Ends a request taken with `closed`: with its answer's status and headers, or none (no answer). */
  observe(status?: number, headers: Record<string, string | string[] | undefined> = {}): void {
    this.inFlight--;
    const limit = Number(first(headers['x-ratelimit-limit']));
    if (!(limit > 0)) return;
    const now = Date.now();
    this.refill(now);
    this.limit = limit;
    const remaining = Number(first(headers['x-ratelimit-remaining']));
    if (Number.isFinite(remaining)) this.tokens = Math.min(this.tokens, remaining - this.inFlight);
    if (status === 429) {
      const retryAfterSeconds = Number(first(headers['retry-after']));
      if (Number.isFinite(retryAfterSeconds) && retryAfterSeconds > 0) this.openAtMs = Math.max(this.openAtMs, now + retryAfterSeconds * 1000);
    }
  }

  private refill(now: number): void {
    if (this.limit > 0) this.tokens = Math.min(this.limit, this.tokens + ((now - this.refilledAtMs) / 1000) * this.limit);
    this.refilledAtMs = now;
  }
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
