import { createHash } from 'node:crypto';

/**
 * Which API a client calls: its base URL, normalized, and a fingerprint of its key (never the key).
 * A run carries the identity it was started for, and a worker whose client has another refuses
 * the run's tasks (activities/run-guard.ts), so a worker set up for one API never spends another's
 * run on it.
 */
export interface ApiIdentity {
  /** The base URL as the client addresses it: origin and path, ending in /v1. */
  baseUrl: string;
  /** The first 12 hex digits of the key's SHA-256. */
  keyFingerprint: string;
}

/** `https://API.example.com`, `https://api.example.com/` and `https://api.example.com/v1` are one API. */
export function normalBaseUrl(baseUrl: string): string {
  const base = new URL(baseUrl);
  const path = base.pathname.replace(/\/+$/, '');
  return `${base.origin}${path.endsWith('/v1') ? path : `${path}/v1`}`;
}

export function keyFingerprint(apiKey: string): string {
  return createHash('sha256').update(apiKey).digest('hex').slice(0, 12);
}

export function apiIdentity(settings: { baseUrl: string; apiKey: string }): ApiIdentity {
  return { baseUrl: normalBaseUrl(settings.baseUrl), keyFingerprint: keyFingerprint(settings.apiKey) };
}

export function sameApi(a: ApiIdentity, b: ApiIdentity): boolean {
  return a.baseUrl === b.baseUrl && a.keyFingerprint === b.keyFingerprint;
}
