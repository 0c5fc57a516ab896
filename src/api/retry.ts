import pRetry from 'p-retry';
import { setTimeout as sleep } from 'node:timers/promises';
import { CallDeadlineError, RateLimitedError, SocialApiError } from './errors.js';

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

/**
 * Errors worth another attempt here: network errors, 5xx and 429. A call past its deadline is
 * retryable for its caller, but not here: the deadline is over all of the client's attempts.
 */
function isRetryable(error: unknown): error is SocialApiError {
  return error instanceof SocialApiError && error.retryable && !(error instanceof CallDeadlineError);
}

export async function withRetries<T>(
  operation: (attempt: number) => Promise<T>,
  policy: RetryPolicy,
  onRetry: (error: SocialApiError, attempt: number) => void = () => undefined,
): Promise<T> {
  // The first attempt runs outside p-retry, which is only called once an attempt has failed:
  // nearly every call succeeds at once, and p-retry's per-call setup was most of the client's
  // measured overhead per request (bench/client-overhead.mjs). p-retry then replays that first
  // failure as its own attempt 1, so its attempt count, backoff and hooks are exactly as if it
  // had run from the start.
  let firstFailure: unknown;
  try {
    return await operation(1);
  } catch (error) {
    if (!isRetryable(error) || policy.maxAttempts <= 1) throw error;
    firstFailure = error;
  }
  return pRetry(
    (attempt) => {
      if (attempt > 1) return operation(attempt);
      throw firstFailure;
    },
    {
      retries: policy.maxAttempts - 1,
      factor: 2,
      minTimeout: policy.minDelayMs,
      maxTimeout: policy.maxDelayMs,
      randomize: true,
      maxRetryTime: policy.maxElapsedMs,
      shouldRetry: ({ error }) => isRetryable(error),
      shouldConsumeRetry: () => true,
      onFailedAttempt: async ({ error, attemptNumber, retriesLeft }) => {
        if (!isRetryable(error) || retriesLeft === 0) return;
        onRetry(error, attemptNumber);
        // The server said when it will take us again; backoff comes on top of that, never instead.
        if (error instanceof RateLimitedError && error.retryAfterMs) await sleep(error.retryAfterMs);
      },
    },
  );
}
