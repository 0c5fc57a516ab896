/**
 * HARVESTER_FOLLOW_RETRY_MS, how long `harvester run` waits before asking Temporal again while it
 * does not answer: the default when unset, a whole number of milliseconds when set, and a clear
 * error naming the variable otherwise.
 */
import { expect, it } from 'vitest';
import { DEFAULT_FOLLOW_RETRY_MS, followRetryMs } from '../../src/cli/follow-retry.js';

it('reads HARVESTER_FOLLOW_RETRY_MS, and refuses what is no whole number of milliseconds', () => {
  expect(followRetryMs({})).toBe(DEFAULT_FOLLOW_RETRY_MS);
  expect(followRetryMs({ HARVESTER_FOLLOW_RETRY_MS: '' })).toBe(DEFAULT_FOLLOW_RETRY_MS);
  expect(followRetryMs({ HARVESTER_FOLLOW_RETRY_MS: '50' })).toBe(50);
  for (const bad of ['0', '-5', '1.5', 'soon', '2s']) {
    expect(() => followRetryMs({ HARVESTER_FOLLOW_RETRY_MS: bad }), bad).toThrow(`HARVESTER_FOLLOW_RETRY_MS is ${JSON.stringify(bad)}: give a whole number of milliseconds, 1 or more`);
  }
});
