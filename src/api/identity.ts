import { createHash } from 'node:crypto';
import { normalBaseUrl, type ApiIdentity } from '../api-catalog/api-identity.js';

// The type lives in the catalog (the workflow carries it); re-exported for activities/run-guard.ts,
// which imports it with sameApi from here.
export type { ApiIdentity };

export function keyFingerprint(apiKey: string): string {
  return createHash('sha256').update(apiKey).digest('hex').slice(0, 12);
}

export function apiIdentity(settings: { baseUrl: string; apiKey: string }): ApiIdentity {
  return { baseUrl: normalBaseUrl(settings.baseUrl), keyFingerprint: keyFingerprint(settings.apiKey) };
}

export function sameApi(a: ApiIdentity, b: ApiIdentity): boolean {
  return a.baseUrl === b.baseUrl && a.keyFingerprint === b.keyFingerprint;
}
