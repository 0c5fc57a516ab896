/** What every route reads from a request the same way: its id, its key, and the shared parameters. */
import { randomUUID } from 'node:crypto';
import { invalidParameter } from './api-error.js';

export function newRequestId(): string {
  return `req_${randomUUID().replaceAll('-', '')}`;
}

export function bearerKey(header: string | undefined): string | undefined {
  const match = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1] : undefined;
}

export function parseFresh(value: string | null): boolean {
  if (value === null || value === 'false') return false;
  if (value === 'true') return true;
  throw invalidParameter('fresh', `fresh must be true or false, got ${JSON.stringify(value)}`);
}

export function parseLimit(value: string | null, fallback: number, max: number): number {
  if (value === null) return fallback;
  if (!/^\d+$/.test(value) || Number(value) < 1) throw invalidParameter('limit', `limit must be a whole number ≥ 1, got ${JSON.stringify(value)}`);
  const limit = Number(value);
  if (limit > max) throw invalidParameter('limit', `limit must be at most ${max}, got ${limit}`);
  return limit;
}
