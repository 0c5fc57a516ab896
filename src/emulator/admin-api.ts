/**
 * The admin API under `/_emulator/` (loopback only): what a test or a benchmark reads and sets
 * that the real API has no route for: the world's catalog, the ledger, webhook deliveries, keys
 * and plans, the emulated clock, and injected faults.
 */
import type { IncomingMessage } from 'node:http';
import { ApiError, invalidParameter } from './api-error.js';
import type { Billing } from './billing.js';
import { ENDPOINTS, type WebhookEvent } from '../api-catalog/endpoints.js';
import type { EmulatedClock } from './clock.js';
import { readJsonBody, type Reply } from './http-io.js';
import type { WebhookDispatcher } from './webhook-dispatcher.js';
import type { World } from './world/world.js';

export interface FaultSettings {
  fault_rate: number;
  rate_limit: number;
  latency_ms: number;
  /** The next this many download answers carry a media link that has already expired. */
  expired_media_links: number;
  /** The media host is down: every media link answers 503 while this is true. */
  media_down: boolean;
  /**
   * Schema drift: fields the API's answers carry beyond its schema, by endpoint (`tiktok/stats`):
   * added to an object answer's `data`, and to each item of a list answer's. JSON answers only.
   */
  extra_fields: Record<string, Record<string, unknown>>;
}

/** What the admin API reads and changes of a running emulator. */
export interface AdminTarget {
  world: World;
  billing: Billing;
  webhooks: WebhookDispatcher;
  clock: EmulatedClock;
  faults: FaultSettings;
  emit(apiKey: string, type: WebhookEvent, data: Record<string, unknown>): void;
}

export async function adminApi(req: IncomingMessage, url: URL, emulator: AdminTarget): Promise<Reply> {
  const route = `${req.method} ${url.pathname}`;
  switch (route) {
    case 'GET /_emulator/catalog':
      return { status: 200, json: { data: emulator.world.catalog() } };
    case 'GET /_emulator/ledger':
      return { status: 200, json: { data: emulator.billing.ledgerFor(url.searchParams.get('api_key') ?? undefined) } };
    case 'GET /_emulator/deliveries':
      return { status: 200, json: { data: emulator.webhooks.attempts, pending: emulator.webhooks.pending } };
    case 'POST /_emulator/keys': {
      const body = await readJsonBody(req);
      const apiKey = requireApiKey(body.api_key);
      const credits = requireWholeNumber(body.credits, 'credits');
      const account = emulator.billing.setKey(apiKey, credits);
      return { status: 201, json: { data: { api_key: apiKey, credits: account.balance, plan: account.plan } } };
    }
    case 'POST /_emulator/plan': {
      const body = await readJsonBody(req);
      const apiKey = requireApiKey(body.api_key);
      const account = emulator.billing.get(apiKey);
      if (!account) throw new ApiError(404, 'key_not_found', 'no such API key');
      if (typeof body.plan !== 'string' || body.plan === '') throw invalidParameter('plan', 'plan must be a non-empty string');
      const credits = requireWholeNumber(body.credits, 'credits');
      Object.assign(account, { plan: body.plan, planCredits: credits, balance: credits });
      emulator.emit(apiKey, 'plan.changed', { plan: account.plan, credits });
      return { status: 200, json: { data: { api_key: apiKey, plan: account.plan, credits } } };
    }
    case 'POST /_emulator/clock': {
      const body = await readJsonBody(req);
      const seconds = body.advance_seconds;
      if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds < 0) {
        throw invalidParameter('advance_seconds', `advance_seconds must be a number ≥ 0, got ${JSON.stringify(seconds)}`);
      }
      emulator.clock.advance(seconds);
      return { status: 200, json: { data: { now: new Date(emulator.clock.now()).toISOString() } } };
    }
    case 'POST /_emulator/faults': {
      const body = await readJsonBody(req);
      // Check every field before applying any, so a refused request changes nothing.
      const next = {
        fault_rate: body.fault_rate === undefined ? emulator.faults.fault_rate : requireFraction(body.fault_rate),
        rate_limit: body.rate_limit === undefined ? emulator.faults.rate_limit : requirePositive(body.rate_limit, 'rate_limit'),
        latency_ms: body.latency_ms === undefined ? emulator.faults.latency_ms : requireWholeNumber(body.latency_ms, 'latency_ms'),
        expired_media_links: body.expired_media_links === undefined ? emulator.faults.expired_media_links : requireWholeNumber(body.expired_media_links, 'expired_media_links'),
        media_down: body.media_down === undefined ? emulator.faults.media_down : requireBoolean(body.media_down, 'media_down'),
        extra_fields: body.extra_fields === undefined ? emulator.faults.extra_fields : requireExtraFields(body.extra_fields),
      };
      Object.assign(emulator.faults, next);
      return { status: 200, json: { data: emulator.faults } };
    }
    default:
      throw new ApiError(404, 'route_not_found', `no admin route ${route}`);
  }
}

function requireApiKey(value: unknown): string {
  if (typeof value !== 'string' || !value.startsWith('sk_live_')) throw invalidParameter('api_key', 'api_key must be a string starting with sk_live_');
  return value;
}

function requireWholeNumber(value: unknown, param: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) throw invalidParameter(param, `${param} must be a whole number ≥ 0, got ${JSON.stringify(value)}`);
  return value;
}

function requireBoolean(value: unknown, param: string): boolean {
  if (typeof value !== 'boolean') throw invalidParameter(param, `${param} must be true or false, got ${JSON.stringify(value)}`);
  return value;
}

function requirePositive(value: unknown, param: string): number {
  if (typeof value !== 'number' || !(value > 0)) throw invalidParameter(param, `${param} must be a number > 0, got ${JSON.stringify(value)}`);
  return value;
}

function requireFraction(value: unknown): number {
  if (typeof value !== 'number' || value < 0 || value > 1) throw invalidParameter('fault_rate', `fault_rate must be between 0 and 1, got ${JSON.stringify(value)}`);
  return value;
}

/** `extra_fields`: an object of endpoint keys (`<platform>/<endpoint>`), each an object of fields to add. */
function requireExtraFields(value: unknown): Record<string, Record<string, unknown>> {
  const isObject = (candidate: unknown): candidate is Record<string, unknown> => typeof candidate === 'object' && candidate !== null && !Array.isArray(candidate);
  if (!isObject(value)) throw invalidParameter('extra_fields', `extra_fields must be an object of endpoints, each an object of fields, got ${JSON.stringify(value)}`);
  for (const [endpoint, fields] of Object.entries(value)) {
    if (!ENDPOINTS.some((spec) => `${spec.platform}/${spec.name}` === endpoint)) throw invalidParameter('extra_fields', `extra_fields names ${JSON.stringify(endpoint)}, which is no endpoint (tiktok/stats, say)`);
    if (!isObject(fields)) throw invalidParameter('extra_fields', `extra_fields.${endpoint} must be an object of fields, got ${JSON.stringify(fields)}`);
  }
  return value as Record<string, Record<string, unknown>>;
}
