/**
 * The emulator of the Social Content Data API: every endpoint and rule of ../shared/api-spec.md,
 * plus the documented answers where the spec says "not shown" (docs/api.md), over real HTTP. This
 * file routes requests and bills them; jobs, webhook endpoints, cursors and media links, and the
 * admin API have files of their own.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadPriceTable } from '../config/prices.js';
import { PAGE_LIMITS, endpointKey, findEndpoint, type EndpointKey, type EndpointSpec, type PriceTable, type WebhookEvent } from '../api-catalog/endpoints.js';
import { adminApi, type AdminTarget, type FaultSettings } from './admin-api.js';
import { ApiError } from './api-error.js';
import { Billing, type CallContext, type KeyAccount } from './billing.js';
import { EmulatedClock, isoSeconds } from './clock.js';
import { ContentProducer, type ListPosition, type Target } from './content.js';
import { csvColumns, toCsv } from './csv.js';
import { CursorsAndMedia } from './cursors-and-media.js';
import { checkUrlLength, errorReply, isLoopback, MAX_REQUEST_HEAD_BYTES, writeReply, type Reply } from './http-io.js';
import { JobEndpoints } from './job-endpoints.js';
import { JobRunner, type StoredJob } from './jobs.js';
import { buildOpenApiDocument } from './openapi.js';
import { RateLimiter } from './rate-limiter.js';
import { bearerKey, newRequestId, parseFresh, parseLimit } from './request-parsers.js';
import { cacheTtlMs, ResponseCache } from './response-cache.js';
import { SignedTokens } from './signed-token.js';
import { DEFAULT_RETRY_SCHEDULE_MS, WebhookDispatcher } from './webhook-dispatcher.js';
import { WebhookEndpoints } from './webhook-endpoints.js';
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

interface CachedObject {
  data: Record<string, unknown>;
}
interface CachedList {
  items: Record<string, unknown>[];
  next: ListPosition | undefined;
  hasMore: boolean;
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
  private readonly cursors: CursorsAndMedia;
  private readonly webhooks: WebhookDispatcher;
  private readonly jobs: JobRunner;
  private readonly jobEndpoints: JobEndpoints;
  private readonly webhookEndpoints: WebhookEndpoints;
  private readonly adminTarget: AdminTarget;
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
      expired_media_links: 0,
      media_down: false,
      extra_fields: {},
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
    this.cursors = new CursorsAndMedia(new SignedTokens(randomBytes(32)), this.clock, () => this.origin);
    this.jobEndpoints = new JobEndpoints(this.jobs, this.content, this.clock, this.cursors);
    this.webhookEndpoints = new WebhookEndpoints(this.webhooks, this.clock);
    this.adminTarget = { world: this.world, billing: this.billing, webhooks: this.webhooks, clock: this.clock, faults: this.faults, emit: (apiKey, type, data) => this.emit(apiKey, type, data) };
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
      else if (path.startsWith('/_media/') && req.method === 'GET') {
        // Media files come from a CDN, which fails now and then too, or is down for a while.
        if (this.faults.media_down) throw new ApiError(503, 'service_unavailable', 'the media host is down (emulator fault media_down)');
        if (this.faults.fault_rate > 0 && this.faultDraw() < this.faults.fault_rate) throw injectedFault(this.faultDraw());
        reply = this.cursors.media(path.slice('/_media/'.length));
      }
      else if (path.startsWith('/_emulator/')) {
        if (!isLoopback(req.socket.remoteAddress)) throw new ApiError(403, 'forbidden', 'the admin API answers only clients on loopback');
        reply = await adminApi(req, url, this.adminTarget);
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
      if (segments.length === 1 && method === 'POST') return this.webhookEndpoints.create(req, context);
      if (segments.length === 1 && method === 'GET') return this.webhookEndpoints.list(context);
      if (segments.length === 2 && method === 'DELETE') return this.webhookEndpoints.delete(second ?? '', context);
      throw notAllowedOrMissing(method, url.pathname, segments.length <= 2);
    }
    if (first === 'jobs' && second) {
      if (method !== 'GET') throw notAllowedOrMissing(method, url.pathname, segments.length <= 3);
      if (segments.length === 2) return { status: 200, json: { data: this.jobEndpoints.own(second, context).record, request_id: context.requestId } };
      if (segments.length === 3 && third === 'results') return this.jobEndpoints.results(second, url, context);
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
    if (spec.name === 'download') data = this.signedDownload(data, call.now);
    const cacheHeader = { 'x-cache': cached ? 'HIT' : 'MISS' };
    if (call.format === 'text') {
      const text = spec.name === 'transcript' ? String(data.text) : String(data.summary);
      return { status: 200, body: text, contentType: 'text/plain; charset=utf-8', headers: cacheHeader };
    }
    const extra = this.faults.extra_fields[key];
    return { status: 200, json: { data: extra ? { ...data, ...extra } : data, request_id: context.requestId }, headers: cacheHeader };
  }

  /** A download's media link; while the expired-links fault lasts, one that has already expired. */
  private signedDownload(data: Record<string, unknown>, nowMs: number): Record<string, unknown> {
    const expired = this.faults.expired_media_links > 0;
    if (expired) this.faults.expired_media_links--;
    return this.cursors.signMedia(data, nowMs, expired);
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
    const position = cursorText === null ? undefined : (this.cursors.readCursor(cursorText, key, identity, call.now) as ListPosition);
    requireBalance(context.account, limit * call.price);
    if (limit > PAGE_LIMITS.maxSynchronous) return this.jobEndpoints.create(spec, target, query, position, limit, context);

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
    const cursor = page.hasMore && page.next !== undefined ? this.cursors.writeCursor(key, identity, page.next, call.now + this.cursorTtlMs) : undefined;
    const headers: Record<string, string> = { 'x-cache': cached ? 'HIT' : 'MISS' };
    if (call.format === 'csv') {
      headers['x-has-more'] = String(page.hasMore);
      if (cursor) headers['x-next-cursor'] = cursor;
      return { status: 200, body: toCsv(page.items, csvColumns(spec)), contentType: 'text/csv; charset=utf-8', headers };
    }
    const meta = { count: page.items.length, limit, ...(spec.item ? { item: spec.item } : {}), ...(cursor ? { cursor } : {}), has_more: page.hasMore };
    const extra = this.faults.extra_fields[key];
    return { status: 200, json: { data: extra ? page.items.map((item) => ({ ...item, ...extra })) : page.items, meta, request_id: context.requestId }, headers };
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
}

// ---- small pure helpers -------------------------------------------------------------------------

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

function targetIdentity(target: Target, raw: string): string {
  if (target.kind === 'item') return `${target.item.kind}:${target.item.id}`;
  if (target.kind === 'account') return target.account.handle;
  return target.topic ?? raw;
}
