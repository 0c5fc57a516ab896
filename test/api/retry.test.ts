import { describe, expect, it } from 'vitest';
import { AuthenticationError, ServerError } from '../../src/api/errors.js';
import { withRetries, type RetryPolicy } from '../../src/api/retry.js';

// A pure unit: the first attempt runs outside p-retry, so these pin down that the attempt count,
// the retry hook and the give-up rules are the same as if p-retry had run every attempt.
const policy: RetryPolicy = { maxAttempts: 4, minDelayMs: 1, maxDelayMs: 2, maxElapsedMs: 10_000 };
const serverError = () => new ServerError('boom', { status: 500, code: 'internal_error' });

describe('withRetries', () => {
  it('returns the first success without retrying', async () => {
    const attempts: number[] = [];
    await expect(withRetries(async (attempt) => (attempts.push(attempt), 'ok'), policy)).resolves.toBe('ok');
    expect(attempts).toEqual([1]);
  });

  it('retries a retryable failure, numbering attempts and reporting each retry once', async () => {
    const attempts: number[] = [];
    const retried: number[] = [];
    const result = await withRetries(
      async (attempt) => {
        attempts.push(attempt);
        if (attempt < 3) throw serverError();
        return attempt;
      },
      policy,
      (_error, attempt) => retried.push(attempt),
    );
    expect(result).toBe(3);
    expect(attempts).toEqual([1, 2, 3]);
    expect(retried).toEqual([1, 2]);
  });

  it('makes exactly maxAttempts attempts, then throws the last error', async () => {
    let calls = 0;
    const failure = withRetries(async () => {
      calls++;
      throw serverError();
    }, policy);
    await expect(failure).rejects.toBeInstanceOf(ServerError);
    expect(calls).toBe(4);
  });

  it('never retries an error that is not retryable, on the first attempt or a later one', async () => {
    let calls = 0;
    await expect(
      withRetries(async () => {
        calls++;
        throw new AuthenticationError('bad key', { status: 401, code: 'invalid_api_key' });
      }, policy),
    ).rejects.toBeInstanceOf(AuthenticationError);
    expect(calls).toBe(1);

    calls = 0;
    await expect(
      withRetries(async () => {
        calls++;
        if (calls === 1) throw serverError();
        throw new AuthenticationError('bad key', { status: 401, code: 'invalid_api_key' });
      }, policy),
    ).rejects.toBeInstanceOf(AuthenticationError);
    expect(calls).toBe(2);
  });

  it('with one attempt allowed, a retryable failure is thrown at once', async () => {
    let calls = 0;
    await expect(
      withRetries(async () => {
        calls++;
        throw serverError();
      }, { ...policy, maxAttempts: 1 }),
    ).rejects.toBeInstanceOf(ServerError);
    expect(calls).toBe(1);
  });
});
