/**
 * Which API a client calls: its base URL, normalized, and a fingerprint of its key (never the key).
 * A run carries the identity it was started for, and a worker whose client has another refuses
 * the run's tasks (activities/run-guard.ts), so a worker set up for one API never spends another's
 * run on it. Here, below the client, so that the workflow, which carries it, imports nothing from
 * src/api; the fingerprint itself needs a hash, so it is made in src/api/identity.ts.
 */
export interface ApiIdentity {
  /** The base URL as the client addresses it: origin and path, ending in /v1. */
  baseUrl: string;
  /** The first 12 hex digits of the key's SHA-256. */
  keyFingerprint: string;
}

/**
 * The spec addresses endpoints as {base_url}/v1/...; a base that already ends in /v1, as the
 * emulator prints it, is taken as it is. So `https://API.example.com`, `https://api.example.com/`
 * and `https://api.example.com/v1` are one API.
 */
export function normalBaseUrl(baseUrl: string): string {
  const base = new URL(baseUrl);
  const path = base.pathname.replace(/\/+$/, '');
  return `${base.origin}${path.endsWith('/v1') ? path : `${path}/v1`}`;
}
