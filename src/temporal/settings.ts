/**
 * Where Temporal is, read from the environment. Apart from the client (connection.ts) so that a
 * command that starts a run over Temporal's HTTP API (run-start.ts) reads them without
 * loading Temporal's gRPC client, about 0.3 s of a start.
 */
import { readFileSync } from 'node:fs';
import { EnvironmentError } from '../config/environment.js';

/**
 * Where Temporal is: the embedded dev server by default (`harvester temporal`, 127.0.0.1:7233),
 * or an existing cluster or Temporal Cloud through TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE, with
 * TEMPORAL_API_KEY, or mTLS through TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY (TEMPORAL_TLS=true for
 * server-verified TLS alone).
 */
export interface TemporalSettings {
  address: string;
  namespace: string;
  apiKey?: string;
  tls?: boolean | { clientCertPair: { crt: Buffer; key: Buffer } };
  /**
   * Temporal's HTTP API, where `harvester run` starts its run (TEMPORAL_HTTP_ADDRESS): an origin,
   * `http://127.0.0.1:7243`. Absent, runs are started through the gRPC client.
   */
  http?: {
    origin: string;
    /** Whether the user named it (TEMPORAL_HTTP_ADDRESS); else it is the local dev server's default, which may not serve it. */
    named: boolean;
  };
}

export const DEFAULT_TEMPORAL_ADDRESS = '127.0.0.1:7233';

/**
 * The HTTP API's port beside a gRPC port, where the dev servers of `harvester temporal`, `dev` and
 * the demo serve it unless told another: the gRPC port plus ten (7233 and 7243, Temporal's
 * convention), or the one ten below at the top of the range.
 */
export function httpPortBeside(grpcPort: number): number {
  return grpcPort + 10 <= 65_535 ? grpcPort + 10 : grpcPort - 10;
}

/** The HTTP API of the dev server that `harvester temporal` and `harvester dev` start by default. */
export const DEFAULT_TEMPORAL_HTTP_ADDRESS = `127.0.0.1:${httpPortBeside(7233)}`;

export function temporalSettingsFromEnv(env: NodeJS.ProcessEnv = process.env): TemporalSettings {
  const settings: TemporalSettings = { address: env.TEMPORAL_ADDRESS || DEFAULT_TEMPORAL_ADDRESS, namespace: env.TEMPORAL_NAMESPACE || 'default' };
  if (env.TEMPORAL_API_KEY) {
    settings.apiKey = env.TEMPORAL_API_KEY;
    settings.tls = true;
  }
  if (env.TEMPORAL_TLS_CERT || env.TEMPORAL_TLS_KEY) {
    if (!env.TEMPORAL_TLS_CERT || !env.TEMPORAL_TLS_KEY) throw new Error('TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY go together: set both or neither');
    settings.tls = { clientCertPair: { crt: readFileSync(env.TEMPORAL_TLS_CERT), key: readFileSync(env.TEMPORAL_TLS_KEY) } };
  } else if (env.TEMPORAL_TLS === 'true') {
    settings.tls = true;
  }
  // The HTTP API's address goes with the gRPC one: named beside it, or both the local defaults.
  if (env.TEMPORAL_HTTP_ADDRESS) settings.http = { origin: httpOrigin(env.TEMPORAL_HTTP_ADDRESS, settings.tls !== undefined), named: true };
  else if (!env.TEMPORAL_ADDRESS) settings.http = { origin: httpOrigin(DEFAULT_TEMPORAL_HTTP_ADDRESS, settings.tls !== undefined), named: false };
  return settings;
}

/** `host:port` (https with TLS, else http) or an http(s) URL, as an origin; anything else is said with the variable and its value. */
function httpOrigin(address: string, tls: boolean): string {
  const withScheme = /^[a-z]+:\/\//i.test(address) ? address : `${tls ? 'https' : 'http'}://${address}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new EnvironmentError(`TEMPORAL_HTTP_ADDRESS is ${JSON.stringify(address)}: not host:port or an http(s) URL`);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.pathname.length > 1 || url.search || url.username) {
    throw new EnvironmentError(`TEMPORAL_HTTP_ADDRESS is ${JSON.stringify(address)}: not host:port or an http(s) URL with no path`);
  }
  return url.origin;
}
