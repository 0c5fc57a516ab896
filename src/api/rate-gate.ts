import { setTimeout as sleep } from 'node:timers/promises';

/**
 * One gate per client, and so per API key in a worker: every request waits at it while the API
 * has said to slow down, so raising concurrency never turns into a storm of 429s. It closes for a
 * 429's Retry-After, and for one token's refill time (1 s / X-RateLimit-Limit) when
 * X-RateLimit-Remaining reaches 0. Hand-written: the limit is the server's, read from its headers,
 * which the token-bucket libraries (they count on their own clock) do not follow.
 */
export class RateGate {
  private openAtMs = 0;

  /** Undefined while the gate is open (no promise to await on the hot path), else when it opens. */
  closed(): Promise<void> | undefined {
    return this.openAtMs > Date.now() ? this.waitOpen() : undefined;
  }

  private async waitOpen(): Promise<void> {
    for (let wait = this.openAtMs - Date.now(); wait > 0; wait = this.openAtMs - Date.now()) await sleep(wait);
  }

  observe(status: number, headers: Record<string, string | string[] | undefined>): void {
    if (status === 429) {
      const retryAfterSeconds = Number(first(headers['retry-after']));
      if (Number.isFinite(retryAfterSeconds) && retryAfterSeconds > 0) this.closeFor(retryAfterSeconds * 1000);
      return;
    }
    const remaining = Number(first(headers['x-ratelimit-remaining']));
    const limit = Number(first(headers['x-ratelimit-limit']));
    if (remaining === 0 && limit > 0) this.closeFor(1000 / limit);
  }

  private closeFor(ms: number): void {
    this.openAtMs = Math.max(this.openAtMs, Date.now() + ms);
  }
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
