/**
 * The emulator of the Social Content Data API: every endpoint and rule of ../shared/api-spec.md,
 * plus the documented answers where the spec says "not shown" (docs/api.md), over real HTTP.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadPriceTable } from '../config/prices.js';
import {
  PAGE_LIMITS,
  WEBHOOK_EVENTS,
  endpointKey,
  findEndpoint,
  type EndpointKey,
  type EndpointSpec,
  type PriceTable,
  type WebhookEvent,
} from '../api-catalog/endpoints.js';
import { ApiError, invalidParameter } from './api-error.js';
import { Billing, type KeyAccount } from './billing.js';
import { EmulatedClock, isoSeconds } from './clock.js';
import { ContentProducer, type ListPosition, type Target } from './content.js';
import { csvColumns, toCsv } from './csv.js';
import { checkUrlLength, errorReply, isLoopback, MAX_CURSOR_LENGTH, MAX_REQUEST_HEAD_BYTES, readJsonBody, writeReply, type Reply } from './http-io.js';
import { JobRunner, type StoredJob } from './jobs.js';
import { buildOpenApiDocument } from './openapi.js';
import { RateLimiter } from './rate-limiter.js';
import { cacheTtlMs, ResponseCache } from './response-cache.js';
import { SignedTokens } from './signed-token.js';
import { DEFAULT_RETRY_SCHEDULE_MS, WebhookDispatcher } from './webhook-dispatcher.js';
import { randomStream } from './world/random.js';
import { World } from './world/world.js';

export interface EmulatorOptions {
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  seed?: number;
  /** Keys that exist at start; one is made up from the seed when none is given. */
  apiKeys?: string[];
  /** Starting balance (and plan credits) of each key. */
  credits?: number;
  /** Requests per second per key; the bucket holds as many. */
  rateLimit?: number;
  /** Fraction of /v1 requests answered with an injected 500, 502 or 503. */
  faultRate?: number;
  latencyMs?: number;
  cursorTtlSeconds?: number;
  prices?: PriceTable;
  accountsPerPlatform?: number;
  webhookRetryScheduleMs?: readonly number[];
  webhookTimeoutMs?: number;
  webhookCa?: string | Buffer;
  /** Time from queued to running and from running to done, for each job. */
  jobStepMs?: number;
}

export interface FaultSettings {
  fault_rate: number;
  rate_limit: number;
  latency_ms: number;
}

export interface Emulator {
  /** http://HOST:PORT */
  origin: string;
  /** http://HOST:PORT/v1 */
  baseUrl: string;
  apiKeys: string[];
  close(): Promise<void>;
}

export const EMULATOR_DEFAULTS = {
  host: '127.0.0.1',
  port: 8787,
  seed: 42,
  credits: 1_000_000,
  rateLimit: 100,
  faultRate: 0,
  latencyMs: 0,
  cursorTtlSeconds: 600,
  jobStepMs: 100,
  webhookTimeoutMs: 10_000,
} as const;

const MEDIA_URL_LIFETIME_MS = 3_600_000;
const JOB_RESULTS_CURSOR_SCOPE = 'jobs/results';

interface CachedObject {
  data: Record<string, unknown>;
}
interface CachedList {
  items: Record<string, unknown>[];
  next: ListPosition | undefined;
  hasMore: boolean;
}

/** Per-request context: who is calling and what they were charged. */
interface CallContext {
  requestId: string;
  account: KeyAccount;
  charged: number;
}

export async function startEmulator(options: EmulatorOptions = {}): Promise<Emulator> {
  const emulator = new EmulatorServer(options);
  return emulator.listen(options.host ?? EMULATOR_DEFAULTS.host, options.port ?? EMULATOR_DEFAULTS.port);
}

class EmulatorServer {
  private readonly clock = new EmulatedClock();
  private readonly world: World;
  private readonly content: ContentProducer;
  private readonly prices: PriceTable;
  private readonly billing = new Billing();
  private readonly limiter: RateLimiter;
  private readonly cache = new ResponseCache<CachedObject | CachedList>();
  private readonly tokens = new SignedTokens(randomBytes(32));
  private readonly webhooks: WebhookDispatcher;
  private readonly jobs: JobRunner;
  private readonly faultDraw: () => number;
  private readonly faults: FaultSettings;
  private readonly cursorTtlMs: number;
  private readonly apiKeys: string[];
  private openapi: unknown;
  private origin = '';

  constructor(options: EmulatorOptions) {
    const seed = options.seed ?? EMULATOR_DEFAULTS.seed;
    this.world = new World(seed, Math.floor(this.clock.now() / 1000) * 1000, options.accountsPerPlatform);
    this.content = new ContentProducer(this.world);
    this.prices = options.prices ?? loadPriceTable();
    this.faults = {
      fault_rate: options.faultRate ?? EMULATOR_DEFAULTS.faultRate,
      rate_limit: options.rateLimit ?? EMULATOR_DEFAULTS.rateLimit,
      latency_ms: options.latencyMs ?? EMULATOR_DEFAULTS.latencyMs,
    };
    this.limiter = new RateLimiter(this.faults.rate_limit);
    this.faultDraw = randomStream(seed);
    this.cursorTtlMs = (options.cursorTtlSeconds ?? EMULATOR_DEFAULTS.cursorTtlSeconds) * 1000;
    this.apiKeys = options.apiKeys?.length ? options.apiKeys : [`sk_live_emulator_${seed}`];
    for (const key of this.apiKeys) this.billing.setKey(key, options.credits ?? EMULATOR_DEFAULTS.credits);
    this.webhooks = new WebhookDispatcher({
      retryScheduleMs: options.webhookRetryScheduleMs ?? DEFAULT_RETRY_SCHEDULE_MS,
      timeoutMs: options.webhookTimeoutMs ?? EMULATOR_DEFAULTS.webhookTimeoutMs,
      ca: options.webhookCa,
    });
    this.jobs = new JobRunner(
      {
        settle: (job, items) => this.settleJob(job, items),
        finished: (job) => this.emit(job.apiKey, 'job.completed', {
          job_id: job.record.job_id,
          status: job.record.status,
          item_count: job.record.item_count ?? 0,
          credits_charged: job.record.credits_charged,
        }),
        nowIso: () => isoSeconds(this.clock.now()),
        nowMs: () => this.clock.now(),
      },
      options.jobStepMs ?? EMULATOR_DEFAULTS.jobStepMs,
    );
  }

  listen(host: string, port: number): Promise<Emulator> {
    const server = createServer({ maxHeaderSize: MAX_REQUEST_HEAD_BYTES }, (req, res) => {
      this.handle(req, res).catch((error: unknown) => {
        // A bug, not an API answer: say so plainly rather than hang the client.
        if (!res.headersSent) writeReply(res, errorReply(new ApiError(500, 'internal_error', String(error)), newRequestId()), {});
        else res.destroy();
      });
    });
    server.keepAliveTimeout = 65_000;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        const address = server.address() as AddressInfo;
        const hostText = address.family === 'IPv6' ? `[${address.address}]` : address.address;
        this.origin = `http://${hostText}:${address.port}`;
        this.openapi = buildOpenApiDocument(`${this.origin}/v1`);
        resolve({
          origin: this.origin,
          baseUrl: `${this.origin}/v1`,
          apiKeys: [...this.apiKeys],
          close: () => this.close(server),
        });
      });
    });
  }

  private async close(server: Server): Promise<void> {
    this.jobs.close();
    this.webhooks.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://emulator');
    try {
      checkUrlLength(req.url ?? '/', url);
    } catch (error) {
      // Before authentication and rate limiting: a URL this long is refused whoever sends it.
      const requestId = newRequestId();
      return writeReply(res, errorReply(asApiError(error), requestId), { 'x-request-id': requestId });
    }
    const path = url.pathname;
    if (path === '/v1' || path.startsWith('/v1/')) return this.handleV1(req, res, url);
    const requestId = newRequestId();
    let reply: Reply;
    try {
      if (path === '/openapi.json' && req.method === 'GET') reply = { status: 200, json: this.openapi };
      else if (path.startsWith('/_media/') && req.method === 'GET') reply = this.media(path.slice('/_media/'.length));
      else if (path.startsWith('/_emulator/')) {
        if (!isLoopback(req.socket.remoteAddress)) throw new ApiError(403, 'forbidden', 'the admin API answers only clients on loopback');
        reply = await this.admin(req, url);
      } else throw new ApiError(404, 'route_not_found', `no route ${req.method} ${path}`);
    } catch (error) {
      reply = errorReply(asApiError(error), requestId);
    }
    writeReply(res, reply, { 'x-request-id': requestId });
  }

  // ---- /v1 --------------------------------------------------------------------------------------

  private async handleV1(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const requestId = newRequestId();
    const key = bearerKey(req.headers.authorization);
    const account = key === undefined ? undefined : this.billing.get(key);
    this.limiter.ratePerSecond = this.faults.rate_limit;
    // Buckets refill on the wall clock: moving the emulated clock must not hand out requests.
    const rate = this.limiter.take(account ? account.apiKey : 'anonymous', Date.now());
    const headers: Record<string, string> = {
      'x-request-id': requestId,
      'x-ratelimit-limit': String(rate.limit),
      'x-ratelimit-remaining': String(rate.remaining),
      'x-ratelimit-reset': String(rate.resetSeconds),
    };
    const context: CallContext | undefined = account ? { requestId, account, charged: 0 } : undefined;
    let reply: Reply;
    try {
      if (key === undefined) throw new ApiError(401, 'missing_api_key', 'send the header Authorization: Bearer <API key>');
      if (!context) throw new ApiError(401, 'invalid_api_key', 'the API key is not valid');
      if (!rate.allowed) {
        throw new ApiError(429, 'rate_limited', `over ${rate.limit} requests per second; retry after ${rate.retryAfterSeconds} s`, undefined, {}, {
          'retry-after': String(rate.retryAfterSeconds),
        });
      }
      if (this.faults.fault_rate > 0 && this.faultDraw() < this.faults.fault_rate) throw injectedFault(this.faultDraw());
      reply = await this.routeV1(req, url, context);
    } catch (error) {
      reply = errorReply(asApiError(error), requestId);
    }
    if (context) {
      headers['x-credits-charged'] = String(context.charged);
      headers['x-credits-remaining'] = String(context.account.balance);
    }
    if (this.faults.latency_ms > 0) await sleep(this.faults.latency_ms);
    // The API's own clock is the emulated one: its Date header says what "now" is for the data.
    headers.date = new Date(this.clock.now()).toUTCString();
    writeReply(res, reply, headers);
  }

  private async routeV1(req: IncomingMessage, url: URL, context: CallContext): Promise<Reply> {
    const segments = url.pathname.split('/').slice(2);
    const method = req.method ?? 'GET';
    const [first, second, third] = segments;
    if (first === 'webhooks') {
      if (segments.length === 1 && method === 'POST') return this.createWebhook(req, context);
      if (segments.length === 1 && method === 'GET') return this.listWebhooks(context);
      if (segments.length === 2 && method === 'DELETE') return this.deleteWebhook(second ?? '', context);
      throw notAllowedOrMissing(method, url.pathname, segments.length <= 2);
    }
    if (first === 'jobs' && second) {
      if (method !== 'GET') throw notAllowedOrMissing(method, url.pathname, segments.length <= 3);
      if (segments.length === 2) return { status: 200, json: { data: this.ownJob(second, context).record, request_id: context.requestId } };
      if (segments.length === 3 && third === 'results') return this.jobResults(second, url, context);
    }
    const spec = segments.length === 2 ? findEndpoint(first ?? '', second ?? '') : undefined;
    if (!spec) throw new ApiError(404, 'route_not_found', `no route ${method} ${url.pathname}`);
    if (method !== 'GET') throw new ApiError(405, 'method_not_allowed', `${url.pathname} answers GET only`);
    return this.contentCall(spec, url.searchParams, context);
  }

  private contentCall(spec: EndpointSpec, query: URLSearchParams, context: CallContext): Reply {
    const key = endpointKey(spec);
    if (key === 'tiktok/download') {
      throw new ApiError(503, 'download_unavailable', 'TikTok downloads are temporarily unavailable while the media pipeline is rebuilt; this call was not charged');
    }
    const format = query.get('format') ?? 'json';
    if (!(spec.formats as readonly string[]).includes(format)) {
      throw new ApiError(400, 'unsupported_format', `${key} answers format ${spec.formats.join(' or ')}, not ${JSON.stringify(format)}`, 'format');
    }
    const fresh = parseFresh(query.get('fresh'));
    const now = this.clock.now();
    const target = this.content.resolve(spec, query.get(spec.param), now);
    const identity = targetIdentity(target, query.get(spec.param) ?? '');
    const price = this.prices[key];
    return spec.shape === 'object'
      ? this.objectCall(spec, target, identity, { fresh, format, price, now }, context)
      : this.listCall(spec, target, identity, query, { fresh, format, price, now }, context);
  }

  private objectCall(
    spec: EndpointSpec,
    target: Target,
    identity: string,
    call: { fresh: boolean; format: string; price: number; now: number },
    context: CallContext,
  ): Reply {
    const key = endpointKey(spec);
    requireBalance(context.account, call.price);
    const cacheKey = `${key}|${identity}`;
    const cached = call.fresh ? undefined : (this.cache.get(cacheKey, call.now) as CachedObject | undefined);
    let data = cached?.data;
    if (!data) {
      const answer = this.content.object(spec, target, call.now);
      data = answer.data;
      this.cache.set(cacheKey, { data }, cacheTtlMs(spec.cache, answer.contentAgeMs, false), call.now);
    }
    this.charge(context, key, 1, call.price);
    if (spec.name === 'download') data = this.signMedia(data, call.now);
    const cacheHeader = { 'x-cache': cached ? 'HIT' : 'MISS' };
    if (call.format === 'text') {
      const text = spec.name === 'transcript' ? String(data.text) : String(data.summary);
      return { status: 200, body: text, contentType: 'text/plain; charset=utf-8', headers: cacheHeader };
    }
    return { status: 200, json: { data, request_id: context.requestId }, headers: cacheHeader };
  }

  private listCall(
    spec: EndpointSpec,
    target: Target,
    identity: string,
    query: URLSearchParams,
    call: { fresh: boolean; format: string; price: number; now: number },
    context: CallContext,
  ): Reply {
    const key = endpointKey(spec);
    const limit = parseLimit(query.get('limit'), PAGE_LIMITS.defaultLimit, PAGE_LIMITS.maxJob);
    const cursorText = query.get('cursor');
    const position = cursorText === null ? undefined : (this.readCursor(cursorText, key, identity, call.now) as ListPosition);
    requireBalance(context.account, limit * call.price);
    if (limit > PAGE_LIMITS.maxSynchronous) return this.createJob(spec, target, query, position, limit, context);

    const cacheKey = `${key}|${identity}|${limit}|${JSON.stringify(position ?? null)}`;
    const cached = call.fresh ? undefined : (this.cache.get(cacheKey, call.now) as CachedList | undefined);
    let page = cached;
    if (!page) {
      const answer = this.content.list(spec, target, position, limit, call.now);
      page = { items: answer.items, next: answer.next, hasMore: answer.hasMore };
      this.cache.set(cacheKey, page, cacheTtlMs(spec.cache, answer.contentAgeMs, position === undefined), call.now);
    }
    this.charge(context, key, page.items.length, call.price);
    // A cached page re-issues its cursor, so a HIT never hands out a cursor that has expired.
    const cursor = page.hasMore && page.next !== undefined ? this.writeCursor(key, identity, page.next, call.now + this.cursorTtlMs) : undefined;
    const headers: Record<string, string> = { 'x-cache': cached ? 'HIT' : 'MISS' };
    if (call.format === 'csv') {
      headers['x-has-more'] = String(page.hasMore);
      if (cursor) headers['x-next-cursor'] = cursor;
      return { status: 200, body: toCsv(page.items, csvColumns(spec.name, spec.platform)), contentType: 'text/csv; charset=utf-8', headers };
    }
    const meta = { count: page.items.length, limit, ...(spec.item ? { item: spec.item } : {}), ...(cursor ? { cursor } : {}), has_more: page.hasMore };
    return { status: 200, json: { data: page.items, meta, request_id: context.requestId }, headers };
  }

  private charge(context: CallContext, endpoint: EndpointKey, units: number, price: number, jobId?: string): void {
    const credits = units * price;
    const crossedLow = this.billing.charge(context.account, {
      request_id: context.requestId,
      endpoint,
      units,
      credits,
      at: isoSeconds(this.clock.now()),
      ...(jobId ? { job_id: jobId } : {}),
    });
    context.charged += credits;
    if (crossedLow) {
      this.emit(context.account.apiKey, 'credits.low', {
        remaining_credits: context.account.balance,
        plan: context.account.plan,
        plan_credits: context.account.planCredits,
      });
    }
  }

  private emit(apiKey: string, type: WebhookEvent, data: Record<string, unknown>): void {
    this.webhooks.emit(apiKey, type, data, isoSeconds(this.clock.now()));
  }

  // ---- cursors and media -------------------------------------------------------------------------

  private writeCursor(scope: string, identity: string, position: unknown, expiresAtMs: number): string {
    return this.tokens.encode({ s: scope, i: identity, p: position, x: expiresAtMs });
  }

  private readCursor(text: string, scope: string, identity: string, nowMs: number): unknown {
    if (text.length > MAX_CURSOR_LENGTH) {
      throw new ApiError(400, 'invalid_cursor', `the cursor is ${text.length} characters long, over the ${MAX_CURSOR_LENGTH} of any cursor this API issues`, 'cursor');
    }
    const payload = this.tokens.decode(text);
    if (!payload || payload.s !== scope || payload.i !== identity || typeof payload.x !== 'number') {
      throw new ApiError(400, 'invalid_cursor', `the cursor is malformed, altered, or belongs to another ${scope} request`, 'cursor');
    }
    if (payload.x <= nowMs) throw new ApiError(400, 'cursor_expired', 'the cursor has expired; start again from the first page', 'cursor');
    return payload.p;
  }

  private signMedia(record: Record<string, unknown>, nowMs: number): Record<string, unknown> {
    const expiresAtMs = Math.floor(nowMs / 1000) * 1000 + MEDIA_URL_LIFETIME_MS;
    const token = this.tokens.encode({ m: record.mime_type, e: record.entity_id, x: expiresAtMs });
    return {
      ...record,
      media_url: `${this.origin}/_media/${token}`,
      expires_at: isoSeconds(expiresAtMs),
      warning: 'This media_url expires within 1 hour. Download the file promptly, or request this endpoint again for a new link.',
    };
  }

  private media(token: string): Reply {
    const payload = this.tokens.decode(token);
    if (!payload || typeof payload.m !== 'string' || typeof payload.x !== 'number') throw new ApiError(404, 'media_not_found', 'no such media link');
    if (payload.x <= this.clock.now()) throw new ApiError(410, 'media_expired', 'this media link has expired; request the download endpoint again');
    return { status: 200, body: MEDIA_BYTES[payload.m] ?? Buffer.alloc(0), contentType: payload.m };
  }

  // ---- jobs ---------------------------------------------------------------------------------------

  private createJob(
    spec: EndpointSpec,
    target: Target,
    query: URLSearchParams,
    position: ListPosition | undefined,
    limit: number,
    context: CallContext,
  ): Reply {
    const pull = () => {
      const items: Record<string, unknown>[] = [];
      let at = position;
      while (items.length < limit) {
        const page = this.content.list(spec, target, at, Math.min(PAGE_LIMITS.jobResultsMax, limit - items.length), this.clock.now());
        items.push(...page.items);
        if (!page.hasMore || page.next === undefined) break;
        at = page.next;
      }
      return items;
    };
    const params = Object.fromEntries(query.entries());
    const job = this.jobs.create(context.account.apiKey, context.requestId, endpointKey(spec), params, spec.item, pull);
    return { status: 202, json: { data: job.record, request_id: context.requestId } };
  }

  private settleJob(job: StoredJob, items: Record<string, unknown>[]): { credits: number } | { error: { code: string; message: string } } {
    const account = this.billing.get(job.apiKey);
    const endpoint = job.record.endpoint as EndpointKey;
    const credits = items.length * this.prices[endpoint];
    if (!account || account.balance < credits) {
      return {
        error: {
          code: 'insufficient_credits',
          message: `the job delivered ${items.length} items costing ${credits} credits, but the balance is ${account?.balance ?? 0}; nothing was charged`,
        },
      };
    }
    this.charge({ requestId: job.requestId, account, charged: 0 }, endpoint, items.length, this.prices[endpoint], job.record.job_id);
    return { credits };
  }

  private ownJob(jobId: string, context: CallContext): StoredJob {
    const job = this.jobs.get(context.account.apiKey, jobId);
    if (!job) throw new ApiError(404, 'job_not_found', `no job ${jobId}`);
    return job;
  }

  private jobResults(jobId: string, url: URL, context: CallContext): Reply {
    const job = this.ownJob(jobId, context);
    if (job.record.status === 'failed') throw new ApiError(409, 'job_failed', `job ${jobId} failed: ${job.record.error?.message ?? ''}`);
    if (job.record.status !== 'completed') throw new ApiError(409, 'job_not_ready', `job ${jobId} is ${job.record.status}; wait for job.completed or poll the job`);
    const now = this.clock.now();
    if (now >= job.resultsExpireAtMs) throw new ApiError(410, 'results_expired', `the results of job ${jobId} were kept 24 hours and are gone`);
    const limit = parseLimit(url.searchParams.get('limit'), PAGE_LIMITS.jobResultsDefault, PAGE_LIMITS.jobResultsMax);
    const cursorText = url.searchParams.get('cursor');
    const offset = cursorText ? (this.readCursor(cursorText, JOB_RESULTS_CURSOR_SCOPE, jobId, now) as number) : 0;
    const items = job.results.slice(offset, offset + limit);
    const hasMore = offset + items.length < job.results.length;
    const cursor = hasMore ? this.writeCursor(JOB_RESULTS_CURSOR_SCOPE, jobId, offset + items.length, job.resultsExpireAtMs) : undefined;
    const meta = { count: items.length, limit, ...(job.item ? { item: job.item } : {}), ...(cursor ? { cursor } : {}), has_more: hasMore };
    return { status: 200, json: { data: items, meta, request_id: context.requestId } };
  }

  // ---- webhooks -----------------------------------------------------------------------------------

  private async createWebhook(req: IncomingMessage, context: CallContext): Promise<Reply> {
    const body = await readJsonBody(req);
    const url = body.url;
    if (typeof url !== 'string' || url === '') throw new ApiError(400, 'missing_parameter', 'url is required', 'url');
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw invalidParameter('url', `url is not a valid URL: ${JSON.stringify(url)}`);
    }
    if (parsed.protocol !== 'https:') throw invalidParameter('url', `url must use HTTPS, got ${JSON.stringify(parsed.protocol.replace(':', ''))}`);
    const events = body.events;
    if (!Array.isArray(events) || events.length === 0) throw invalidParameter('events', `events must be a non-empty array of ${WEBHOOK_EVENTS.join(', ')}`);
    for (const event of events) {
      if (!(WEBHOOK_EVENTS as readonly unknown[]).includes(event)) {
        throw invalidParameter('events', `unknown event ${JSON.stringify(event)}; allowed: ${WEBHOOK_EVENTS.join(', ')}`);
      }
    }
    const unique = [...new Set(events as WebhookEvent[])];
    const endpoint = this.webhooks.register(context.account.apiKey, url, unique, isoSeconds(this.clock.now()));
    const { webhook_id, created_at, secret } = endpoint;
    return { status: 201, json: { data: { webhook_id, url, events: unique, secret, created_at }, request_id: context.requestId } };
  }

  private listWebhooks(context: CallContext): Reply {
    const data = this.webhooks.list(context.account.apiKey).map(({ webhook_id, url, events, created_at }) => ({ webhook_id, url, events, created_at }));
    return { status: 200, json: { data, request_id: context.requestId } };
  }

  private deleteWebhook(webhookId: string, context: CallContext): Reply {
    if (!this.webhooks.delete(context.account.apiKey, webhookId)) throw new ApiError(404, 'webhook_not_found', `no webhook endpoint ${webhookId}`);
    return { status: 204 };
  }

  // ---- admin API ----------------------------------------------------------------------------------

  private async admin(req: IncomingMessage, url: URL): Promise<Reply> {
    const route = `${req.method} ${url.pathname}`;
    switch (route) {
      case 'GET /_emulator/catalog':
        return { status: 200, json: { data: this.world.catalog() } };
      case 'GET /_emulator/ledger':
        return { status: 200, json: { data: this.billing.ledgerFor(url.searchParams.get('api_key') ?? undefined) } };
      case 'GET /_emulator/deliveries':
        return { status: 200, json: { data: this.webhooks.attempts } };
      case 'POST /_emulator/keys': {
        const body = await readJsonBody(req);
        const apiKey = requireApiKey(body.api_key);
        const credits = requireWholeNumber(body.credits, 'credits');
        const account = this.billing.setKey(apiKey, credits);
        return { status: 201, json: { data: { api_key: apiKey, credits: account.balance, plan: account.plan } } };
      }
      case 'POST /_emulator/plan': {
        const body = await readJsonBody(req);
        const apiKey = requireApiKey(body.api_key);
        const account = this.billing.get(apiKey);
        if (!account) throw new ApiError(404, 'key_not_found', 'no such API key');
        if (typeof body.plan !== 'string' || body.plan === '') throw invalidParameter('plan', 'plan must be a non-empty string');
        const credits = requireWholeNumber(body.credits, 'credits');
        Object.assign(account, { plan: body.plan, planCredits: credits, balance: credits });
        this.emit(apiKey, 'plan.changed', { plan: account.plan, credits });
        return { status: 200, json: { data: { api_key: apiKey, plan: account.plan, credits } } };
      }
      case 'POST /_emulator/clock': {
        const body = await readJsonBody(req);
        const seconds = body.advance_seconds;
        if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds < 0) {
          throw invalidParameter('advance_seconds', `advance_seconds must be a number ≥ 0, got ${JSON.stringify(seconds)}`);
        }
        this.clock.advance(seconds);
        return { status: 200, json: { data: { now: new Date(this.clock.now()).toISOString() } } };
      }
      case 'POST /_emulator/faults': {
        const body = await readJsonBody(req);
        // Check every field before applying any, so a refused request changes nothing.
        const next = {
          fault_rate: body.fault_rate === undefined ? this.faults.fault_rate : requireFraction(body.fault_rate),
          rate_limit: body.rate_limit === undefined ? this.faults.rate_limit : requirePositive(body.rate_limit, 'rate_limit'),
          latency_ms: body.latency_ms === undefined ? this.faults.latency_ms : requireWholeNumber(body.latency_ms, 'latency_ms'),
        };
        Object.assign(this.faults, next);
        return { status: 200, json: { data: this.faults } };
      }
      default:
        throw new ApiError(404, 'route_not_found', `no admin route ${route}`);
    }
  }
}

// ---- small pure helpers -------------------------------------------------------------------------

/** Tiny valid-looking files for media links: an MP4 `ftyp` box and a JPEG's start and end markers. */
const MEDIA_BYTES: Record<string, Buffer> = {
  'video/mp4': Buffer.from('000000186674797069736f6d0000020069736f6d69736f32', 'hex'),
  'image/jpeg': Buffer.from('ffd8ffe000104a46494600010100000100010000ffd9', 'hex'),
};

function newRequestId(): string {
  return `req_${randomUUID().replaceAll('-', '')}`;
}

function bearerKey(header: string | undefined): string | undefined {
  const match = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1] : undefined;
}

function asApiError(error: unknown): ApiError {
  return error instanceof ApiError ? error : new ApiError(500, 'internal_error', `emulator error: ${String(error)}`);
}

function injectedFault(draw: number): ApiError {
  const [status, code] = draw < 1 / 3 ? [500, 'internal_error'] : draw < 2 / 3 ? [502, 'bad_gateway'] : [503, 'service_unavailable'];
  return new ApiError(status, code, 'injected fault (emulator --fault-rate); nothing was charged');
}

function notAllowedOrMissing(method: string, path: string, routeExists: boolean): ApiError {
  return routeExists ? new ApiError(405, 'method_not_allowed', `${path} does not answer ${method}`) : new ApiError(404, 'route_not_found', `no route ${method} ${path}`);
}

function requireBalance(account: KeyAccount, worstCase: number): void {
  if (account.balance < worstCase) {
    throw new ApiError(402, 'insufficient_credits', `this call can cost up to ${worstCase} credits and the balance is ${account.balance}; nothing was charged`, undefined, {
      required_credits: worstCase,
      remaining_credits: account.balance,
    });
  }
}

function parseFresh(value: string | null): boolean {
  if (value === null || value === 'false') return false;
  if (value === 'true') return true;
  throw invalidParameter('fresh', `fresh must be true or false, got ${JSON.stringify(value)}`);
}

function parseLimit(value: string | null, fallback: number, max: number): number {
  if (value === null) return fallback;
  if (!/^\d+$/.test(value) || Number(value) < 1) throw invalidParameter('limit', `limit must be a whole number ≥ 1, got ${JSON.stringify(value)}`);
  const limit = Number(value);
  if (limit > max) throw invalidParameter('limit', `limit must be at most ${max}, got ${limit}`);
  return limit;
}

/** What a cache entry or cursor is about: the resolved item, account or query, not its spelling. */
function targetIdentity(target: Target, raw: string): string {
  if (target.kind === 'item') return `${target.item.kind}:${target.item.id}`;
  if (target.kind === 'account') return target.account.handle;
  return target.topic ?? raw;
}

function requireApiKey(value: unknown): string {
  if (typeof value !== 'string' || !value.startsWith('sk_live_')) throw invalidParameter('api_key', 'api_key must be a string starting with sk_live_');
  return value;
}

function requireWholeNumber(value: unknown, param: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) throw invalidParameter(param, `${param} must be a whole number ≥ 0, got ${JSON.stringify(value)}`);
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
