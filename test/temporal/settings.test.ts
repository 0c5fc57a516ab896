/**
 * Where Temporal's HTTP API is (TEMPORAL_HTTP_ADDRESS): named, or the local dev server's default
 * when Temporal itself is the local default; never guessed for a Temporal named elsewhere; a value
 * that is no address is said with the variable and the value.
 */
import { describe, expect, it } from 'vitest';
import { httpPortBeside, temporalSettingsFromEnv } from '../../src/temporal/settings.js';

describe("Temporal's HTTP API in the settings", () => {
  it("is the local dev server's, unnamed, when neither address is set", () => {
    expect(temporalSettingsFromEnv({}).http).toEqual({ origin: 'http://127.0.0.1:7243', named: false });
  });

  it('is absent when TEMPORAL_ADDRESS names a Temporal and TEMPORAL_HTTP_ADDRESS does not: runs start through gRPC', () => {
    expect(temporalSettingsFromEnv({ TEMPORAL_ADDRESS: 'temporal.internal:7233' }).http).toBeUndefined();
  });

  it('is what TEMPORAL_HTTP_ADDRESS names: host:port over http, or https with TLS, or a URL as given', () => {
    expect(temporalSettingsFromEnv({ TEMPORAL_ADDRESS: 't:7233', TEMPORAL_HTTP_ADDRESS: 't:7243' }).http).toEqual({ origin: 'http://t:7243', named: true });
    expect(temporalSettingsFromEnv({ TEMPORAL_ADDRESS: 't:7233', TEMPORAL_TLS: 'true', TEMPORAL_HTTP_ADDRESS: 't:7243' }).http?.origin).toBe('https://t:7243');
    expect(temporalSettingsFromEnv({ TEMPORAL_API_KEY: 'k', TEMPORAL_HTTP_ADDRESS: 'ns.acct.tmprl.cloud:443' }).http?.origin).toBe('https://ns.acct.tmprl.cloud');
    expect(temporalSettingsFromEnv({ TEMPORAL_HTTP_ADDRESS: 'http://[::1]:7243/' }).http?.origin).toBe('http://[::1]:7243');
  });

  it('refuses a value that is not an address, naming the variable and the value', () => {
    for (const bad of ['ftp://t:21', 'http://t:7243/api/v1', 'http://user:pw@t:7243', 'not a host']) {
      expect(() => temporalSettingsFromEnv({ TEMPORAL_HTTP_ADDRESS: bad }), bad).toThrow(`TEMPORAL_HTTP_ADDRESS is ${JSON.stringify(bad)}: not host:port or an http(s) URL`);
    }
  });

  it("is served by the dev servers beside their gRPC port: ten above (Temporal's 7233 and 7243), ten below at the top of the range", () => {
    expect(httpPortBeside(7233)).toBe(7243);
    expect(httpPortBeside(65_530)).toBe(65_520);
  });
});
