import { describe, expect, it } from 'vitest';
import { AUTHENTICATION_ERROR, IDENTITY_REFUSALS, JOB_LOST, runStoppingReason, saidOnce, WRONG_STORE, WRONG_STORE_REASON } from '../../src/harvest/failures.js';

describe('the failure vocabulary', () => {
  it('says why a run-stopping failure stops the run, once, and nothing for a failure that stops only its work', () => {
    expect(runStoppingReason(AUTHENTICATION_ERROR, 'invalid key')).toBe('the API refused the key: invalid key');
    expect(runStoppingReason(WRONG_STORE, `${WRONG_STORE_REASON}: the run was started for /a`)).toBe(`${WRONG_STORE_REASON}: the run was started for /a`);
    expect(runStoppingReason(JOB_LOST, 'a job may exist')).toBeUndefined();
    expect(runStoppingReason('NotFoundError', 'gone')).toBeUndefined();
  });

  it('counts every identity refusal as run-stopping', () => {
    for (const type of IDENTITY_REFUSALS) expect(runStoppingReason(type, 'x')).toMatch(/: x$/);
  });

  it('prefixes a message with why only when it does not already begin with it', () => {
    expect(saidOnce('why', 'why: because')).toBe('why: because');
    expect(saidOnce('why', 'because')).toBe('why: because');
  });
});
