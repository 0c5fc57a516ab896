import pRetry from 'p-retry';
import { setTimeout as sleep } from 'node:timers/promises';
import { RateLimitedError, SocialApiError } from './errors.js';

/**
 * When the client tries a call again: only for errors marked retryable (network errors, 5xx and
 * 429, where the API charged nothing), with exponential backoff and jitter (p-retry), bounded in
 * attempts and in total time, and never sooner than a 429's Retry-After.
 */
export interface RetryPolicy {
  maxAttempts: number;
  minDelayMs: number;
  maxDelayMs: number;
  /** No new attempt starts after this much time since the first. */
  maxElapsedMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { maxAttempts: 6, minDelayMs: 200, maxDelayMs: 10_000, maxElapsedMs: 120_000 };

export async function withRetries<T>(
  operation: (attempt: number) => Promise<T>,
  policy: RetryPolicy,
  onRetry: (error: SocialApiError, attempt: number) => void = () => undefined,
): Promise<T> {
  return pRetry(operation, {
    retries: Math.max(0, policy.maxAttempts - 1),
    factor: 2,
    minTimeout: policy.minDelayMs,
    maxTimeout: policy.maxDelayMs,
    randomize: true,
    maxRetryTime: policy.maxElapsedMs,
    shouldRetry: ({ error }) => error instanceof SocialApiError && error.retryable,
    onFailedAttempt: async ({ error, attemptNumber, retriesLeft }) => {
      if (!(error instanceof SocialApiError) || !error.retryable || retriesLeft === 0) return;
      onRetry(error, attemptNumber);
      // The server said when it will take us again; backoff comes on top of that, never instead.
      if (error instanceof RateLimitedError && error.retryAfterMs) await sleep(error.retryAfterMs);
    },
  });
}
