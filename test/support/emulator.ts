/**
 * Test support: a real emulator on a loopback port, and small HTTP helpers over undici. Tests
 * talk to the emulator over HTTP exactly as any client would.
 */
import { request } from 'undici';
import type { LedgerEntry } from '../../src/emulator/billing.js';
import { startEmulator, type Emulator, type EmulatorOptions } from '../../src/emulator/server.js';

export interface HttpResult<T = unknown> {
  status: number;
  headers: Record<string, string>;
  text: string;
  json: T;
}

export interface TestEmulator extends Emulator {
  apiKey: string;
  /** GET (or another method) on a /v1 path with the key, unless `apiKey: null`. */
  call<T = Record<string, unknown>>(path: string, init?: { method?: string; body?: unknown; apiKey?: string | null; headers?: Record<string, string> }): Promise<HttpResult<T>>;
  admin<T = Record<string, unknown>>(path: string, body?: unknown): Promise<HttpResult<T>>;
  ledger(apiKey?: string): Promise<LedgerRow[]>;
  catalog(): Promise<Record<'tiktok' | 'instagram', { handles: string[]; queries: string[] }>>;
}

export type LedgerRow = LedgerEntry;

export async function http<T>(url: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<HttpResult<T>> {
  const headers: Record<string, string> = { ...init.headers };
  let body: string | undefined;
  if (init.body !== undefined) {
    body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
    headers['content-type'] ??= 'application/json';
  }
  const response = await request(url, { method: (init.method ?? (body ? 'POST' : 'GET')) as 'GET', headers, body });
  const text = await response.body.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: response.statusCode, headers: response.headers as Record<string, string>, text, json: json as T };
}

export async function startTestEmulator(options: EmulatorOptions = {}): Promise<TestEmulator> {
  const emulator = await startEmulator({ port: 0, rateLimit: 10_000, ...options });
  const apiKey = emulator.apiKeys[0] as string;
  return {
    ...emulator,
    apiKey,
    call(path, init = {}) {
      const key = init.apiKey === undefined ? apiKey : init.apiKey;
      const headers = { ...(key === null ? {} : { authorization: `Bearer ${key}` }), ...init.headers };
      return http(`${emulator.baseUrl}${path}`, { ...init, headers });
    },
    admin(path, body) {
      return http(`${emulator.origin}/_emulator/${path}`, { body, method: body === undefined ? 'GET' : 'POST' });
    },
    async ledger(key) {
      const result = await http<{ data: LedgerRow[] }>(`${emulator.origin}/_emulator/ledger${key ? `?api_key=${key}` : ''}`);
      return result.json.data;
    },
    async catalog() {
      const result = await http<{ data: Record<'tiktok' | 'instagram', { handles: string[]; queries: string[] }> }>(`${emulator.origin}/_emulator/catalog`);
      return result.json.data;
    },
  };
}

export const q = encodeURIComponent;

/** Polls until `check` returns a value other than undefined, or fails after `timeoutMs`. */
export async function waitFor<T>(check: () => Promise<T | undefined> | T | undefined, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
