import { describe, expect, it } from 'vitest';
import { NetworkError, ResponseValidationError, errorFromResponse, neverCharged } from '../../src/api/errors.js';

describe('neverCharged: which failed calls cannot have cost credits (a pure unit)', () => {
  it('an error answer (4xx, 5xx, 429) was never charged', () => {
    for (const status of [400, 402, 404, 429, 500, 503]) expect(neverCharged(errorFromResponse(status, '{"error":{"code":"x","message":"m"}}', {})), String(status)).toBe(true);
  });

  it('a request that never left was never charged; a dropped one, or a 200 of the wrong shape, may have been', () => {
    const cause = (code: string) => Object.assign(new Error(code), { code });
    expect(neverCharged(new NetworkError('refused', { code: 'network_error', cause: cause('ECONNREFUSED') }))).toBe(true);
    expect(neverCharged(new NetworkError('connect timeout', { code: 'network_error', cause: cause('UND_ERR_CONNECT_TIMEOUT') }))).toBe(true);
    expect(neverCharged(new NetworkError('reset', { code: 'network_error', cause: cause('ECONNRESET') }))).toBe(false);
    expect(neverCharged(new NetworkError('headers timeout', { code: 'network_error', cause: cause('UND_ERR_HEADERS_TIMEOUT') }))).toBe(false);
    expect(neverCharged(new ResponseValidationError('bad shape', { status: 200, code: 'unexpected_response' }))).toBe(false);
  });
});
