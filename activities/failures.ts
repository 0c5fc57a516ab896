import { ApplicationFailure } from '@temporalio/common';
import { RateLimitedError, SocialApiError } from '../src/api/errors.js';
import { FileWriteError } from '../src/store/durable-file.js';
import { DATA_DIR_NOT_WRITABLE, RUN_STOPPING_ERRORS } from '../src/harvest/failures.js';

const UNWRITABLE = new Set(['EACCES', 'EPERM', 'EROFS', 'ENOSPC', 'EDQUOT', 'EFBIG', 'ENOTDIR']);

/**
 * API errors as Temporal failures: transient ones (network, 5xx, 429) retry with backoff, and a
 * 429's Retry-After becomes the next retry delay; everything else (400, 401, 402, 404) is
 * non-retryable, so a deleted video is recorded as a fact instead of retried into a crash.
 */
export function asActivityFailure(error: unknown): unknown {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code !== undefined && UNWRITABLE.has(code)) {
    // Retrying cannot make a read-only or full disk writable, and each retry would buy its page
    // again: the run stops at once, saying which path.
    // A FileWriteError already names the file and the cause; Node's own errors name the path.
    const path = (error as NodeJS.ErrnoException).path;
    const message = error instanceof FileWriteError ? `: ${error.message}` : ` (${code}${path ? ` at ${path}` : ''})`;
    return ApplicationFailure.create({ type: DATA_DIR_NOT_WRITABLE, message: `${RUN_STOPPING_ERRORS[DATA_DIR_NOT_WRITABLE]}${message}`, nonRetryable: true });
  }
  if (!(error instanceof SocialApiError)) return error;
  return ApplicationFailure.create({
    type: error.name,
    message: error.message,
    nonRetryable: !error.retryable,
    details: [{ code: error.code, status: error.status ?? null, requestId: error.requestId ?? null }],
    ...(error instanceof RateLimitedError && error.retryAfterMs ? { nextRetryDelay: error.retryAfterMs } : {}),
  });
}

/** Runs an activity body, turning API errors into the failures above. */
export async function asActivity<T>(body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (error) {
    throw asActivityFailure(error);
  }
}
