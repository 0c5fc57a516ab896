/**
 * The typed client of the Social Content Data API: the one door every harvest spends money
 * through. It knows every endpoint and its price, validates every answer against the spec's
 * schemas, retries only what is safe to retry, and reports what each call cost.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool, request, type Dispatcher } from 'undici';
import { z } from 'zod';
import type { Logger } from '../logger.js';
import { parseContentUrl } from '../api-catalog/content-urls.js';
import { PAGE_LIMITS, endpointKey, findEndpoint, type EndpointKey, type EndpointName, type EndpointSpec, type Platform, type PriceTable, type WebhookEvent } from '../api-catalog/endpoints.js';
import {
  channelItemSchema,
  channelProfileSchema,
  commentSchema,
  createdWebhookEndpointSchema,
  downloadSchema,
  envelopeSchema,
  jobSchema,
  listEnvelopeSchema,
  searchResultSchema,
  statsSchema,
  summarySchema,
  transcriptSchema,
  webhookEndpointSchema,
  type ChannelItem,
  type ChannelProfile,
  type Comment,
  type CreatedWebhookEndpoint,
  type Download,
  type Job,
  type ListMeta,
  type SearchResult,
  type Stats,
  type Summary,
  type Transcript,
  type WebhookEndpoint,
} from '../api-catalog/resources.js';
import { apiIdentity, keyFingerprint, type ApiIdentity } from './identity.js';
import { CallDeadlineError, InvalidRequestError, MediaExpiredError, NetworkError, ResponseValidationError, ServerError, SocialApiError, errorFromResponse } from './errors.js';
import type { JobCompletions } from './job-completions.js';
import { RateGate } from './rate-gate.js';
import { DEFAULT_RETRY_POLICY, withRetries, type RetryPolicy } from './retry.js';

export interface ObjectData {
  transcript: Transcript;
  summary: Summary;
  stats: Stats;
  'channel-stats': ChannelProfile;
  download: Download;
}
export interface ListItem {
  comments: Comment;
  'channel-videos': ChannelItem;
  'channel-posts': ChannelItem;
  'channel-reels': ChannelItem;
  search: SearchResult;
  'hashtag-search': SearchResult;
  'reels-search': SearchResult;
}
export type ObjectEndpoint = keyof ObjectData;
export type ListEndpoint = keyof ListItem;

// Envelope schemas are built once: building a zod schema costs more than checking an answer.
const OBJECT_ENVELOPES: Record<ObjectEndpoint, z.ZodType> = {
  transcript: envelopeSchema(transcriptSchema),
  summary: envelopeSchema(summarySchema),
  stats: envelopeSchema(statsSchema),
  'channel-stats': envelopeSchema(channelProfileSchema),
  download: envelopeSchema(downloadSchema),
};
const LIST_ENVELOPES: Record<ListEndpoint, z.ZodType> = {
  comments: listEnvelopeSchema(commentSchema),
  'channel-videos': listEnvelopeSchema(channelItemSchema),
  'channel-posts': listEnvelopeSchema(channelItemSchema),
  'channel-reels': listEnvelopeSchema(channelItemSchema),
  search: listEnvelopeSchema(searchResultSchema),
  'hashtag-search': listEnvelopeSchema(searchResultSchema),
  'reels-search': listEnvelopeSchema(searchResultSchema),
};
const JOB_ENVELOPE = envelopeSchema(jobSchema);
const JOB_RESULTS_ENVELOPE = listEnvelopeSchema(z.record(z.string(), z.unknown()));
const CREATED_WEBHOOK_ENVELOPE = envelopeSchema(createdWebhookEndpointSchema);
const WEBHOOKS_ENVELOPE = envelopeSchema(z.array(webhookEndpointSchema));

/** What identifies the subject of a call: `url`, `handle` or `query`, as the endpoint takes. */
export interface ContentParams {
  url?: string;
  handle?: string;
  query?: string;
  fresh?: boolean;
}

export interface ListParams extends ContentParams {
  limit?: number;
  cursor?: string;
}

/** What every billed call reports. */
export interface CallReport {
  endpoint: EndpointKey;
  requestId: string;
  creditsCharged: number;
  /** Price × units from the price table; a different charge is logged as a warning. */
  creditsExpected: number;
  creditsRemaining: number | undefined;
  cache: 'HIT' | 'MISS' | undefined;
  /** When the API answered, on its clock (the answer's Date header; this machine's when it has none). */
  answeredAt: Date;
}

export interface ObjectResult<T> extends CallReport {
  data: T;
}

export interface PageResult<T> extends CallReport {
  items: T[];
  meta: ListMeta;
  /** The cursor of the next page: checkpoint it to resume from here. Undefined on the last page. */
  nextCursor: string | undefined;
  hasMore: boolean;
}

export interface RawResult extends CallReport {
  text: string;
  contentType: string;
  nextCursor: string | undefined;
  hasMore: boolean | undefined;
}

export interface PageOptions {
  /** Stop after this many items, sizing the last request so nothing beyond it is bought. */
  maxItems?: number;
  pageSize?: number;
  /** Resume from a checkpointed cursor. */
  cursor?: string;
}

/**
 * What one billed call may be told besides its parameters: an overall deadline, and what to do
 * before the client sends the call again after an attempt whose answer was lost once the request
 * had left (a cut body, a timeout): the API may have charged that attempt, so the caller journals
 * it before the next one goes out, or throws to stop the retries.
 */
export interface CallOptions {
  /** No attempt runs past this many milliseconds from the call's start; the last is aborted. */
  deadlineMs?: number;
  beforeRepeat?: (lost: NetworkError) => void | Promise<void>;
  /** Told of each failed attempt the client tries again (a 429, a 5xx, a lost answer): what the caller's metrics count. */
  onRetry?: (error: SocialApiError) => void;
}

/** How long a call may take in all, its retries included, unless the caller says otherwise. */
export const DEFAULT_CALL_DEADLINE_MS = 120_000;

export interface JobWaitOptions {
  /** Wake-ups from the job.completed webhook; polling then only backs it up. */
  completions?: JobCompletions;
  pollMinMs?: number;
  pollMaxMs?: number;
  timeoutMs?: number;
}

export interface JobResultsPage {
  items: Record<string, unknown>[];
  meta: ListMeta;
  nextCursor: string | undefined;
  requestId: string;
}

export interface ClientOptions {
  /** The spec's `base_url` (`https://api.example.com`), or the same ending in `/v1`; a trailing slash is fine. */
  baseUrl: string;
  apiKey: string;
  prices: PriceTable;
  /** Path segments of the two platforms, in case the API renames them. */
  platformPaths?: Partial<Record<Platform, string>>;
  retry?: Partial<RetryPolicy>;
  timeouts?: { connectMs?: number; headersMs?: number; bodyMs?: number };
  /**
   * Connections to the API at most; by default as many as the calls in flight need. Nothing else
   * here caps them: the runs' own concurrency does (harvest `concurrency`), and the API's rate
   * limit, which the rate gate keeps, bounds how many are in flight at its latency.
   */
  connections?: number;
  /**
   * Who a call is made for (the run, in a worker): callers waiting on the API's rate limit take
   * turns, so a run with many calls in flight does not crowd out the others. Read at each call.
   */
  callerOf?: () => string | undefined;
  /** Every call's overall deadline unless it gives its own (DEFAULT_CALL_DEADLINE_MS). */
  callDeadlineMs?: number;
  logger?: Logger;
}

interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

export class SocialApiClient {
  private readonly pool: Pool;
  private readonly basePath: string;
  private readonly retry: RetryPolicy;
  private readonly platformPaths: Record<Platform, string>;
  private readonly headers: Record<string, string>;
  private readonly rateGate: RateGate;

  constructor(private readonly options: ClientOptions) {
    const base = new URL(options.baseUrl);
    // The spec addresses endpoints as {base_url}/v1/...; a base that already ends in /v1, as the
    // emulator prints it, is taken as it is.
    const path = base.pathname.replace(/\/+$/, '');
    this.basePath = path.endsWith('/v1') ? path : `${path}/v1`;
    this.pool = new Pool(base.origin, {
      connections: options.connections ?? null,
      connectTimeout: options.timeouts?.connectMs ?? 10_000,
      headersTimeout: options.timeouts?.headersMs ?? 60_000,
      bodyTimeout: options.timeouts?.bodyMs ?? 60_000,
      keepAliveTimeout: 30_000,
    });
    this.retry = { ...DEFAULT_RETRY_POLICY, ...options.retry };
    this.platformPaths = { tiktok: 'tiktok', instagram: 'instagram', ...options.platformPaths };
    this.headers = { authorization: `Bearer ${options.apiKey}`, 'user-agent': 'social-harvester/0.1' };
    this.rateGate = RateGate.of(base.origin, keyFingerprint(options.apiKey));
  }

  get prices(): PriceTable {
    return this.options.prices;
  }

  /** The API this client calls: its base URL and its key's fingerprint (never the key). */
  get identity(): ApiIdentity {
    return apiIdentity(this.options);
  }

  async close(): Promise<void> {
    await this.pool.close();
  }

  // ---- content --------------------------------------------------------------------------------------

  /** One call of an object endpoint: transcript, summary, stats, channel-stats or download. */
  async get<E extends ObjectEndpoint>(platform: Platform, endpoint: E, params: ContentParams, options: CallOptions = {}): Promise<ObjectResult<ObjectData[E]>> {
    const spec = this.spec(platform, endpoint, 'object');
    const response = await this.send('GET', this.contentPath(spec), this.contentQuery(spec, params), undefined, options);
    const body = this.parse(response, OBJECT_ENVELOPES[endpoint], spec) as { data: unknown; request_id: string };
    this.check(response, spec, objectAnswerProblem(spec, params, body.data));
    return Object.assign(this.report(spec, response, body.request_id, 1), { data: body.data as ObjectData[E] });
  }

  /** One page of a list endpoint (limit at most 50; larger pulls go through `startJob`). */
  async page<E extends ListEndpoint>(platform: Platform, endpoint: E, params: ListParams, options: CallOptions = {}): Promise<PageResult<ListItem[E]>> {
    const spec = this.spec(platform, endpoint, 'list');
    if (params.limit !== undefined && params.limit > PAGE_LIMITS.maxSynchronous) {
      throw localError(`a page holds at most ${PAGE_LIMITS.maxSynchronous} items (got limit ${params.limit}); use startJob for larger pulls`, 'limit');
    }
    const response = await this.send('GET', this.contentPath(spec), this.contentQuery(spec, params), undefined, options);
    const body = this.parse(response, LIST_ENVELOPES[endpoint], spec) as z.infer<ReturnType<typeof listEnvelopeSchema>>;
    this.check(response, spec, listAnswerProblem(params.limit ?? PAGE_LIMITS.defaultLimit, body.data as { id: string }[]));
    return Object.assign(this.report(spec, response, body.request_id, body.data.length), {
      items: body.data as ListItem[E][],
      meta: body.meta,
      nextCursor: body.meta.has_more ? body.meta.cursor : undefined,
      hasMore: body.meta.has_more,
    });
  }

  /**
   * Pages of a list, following cursors. Each page exposes its `nextCursor` for checkpointing.
   * With `maxItems`, the last request's limit is shrunk so no item beyond the bound is bought.
   */
  async *pages<E extends ListEndpoint>(platform: Platform, endpoint: E, params: ContentParams, options: PageOptions = {}): AsyncGenerator<PageResult<ListItem[E]>> {
    const pageSize = Math.min(options.pageSize ?? PAGE_LIMITS.maxSynchronous, PAGE_LIMITS.maxSynchronous);
    let cursor = options.cursor;
    let seen = 0;
    for (;;) {
      const limit = options.maxItems === undefined ? pageSize : Math.min(pageSize, options.maxItems - seen);
      if (limit <= 0) return;
      const page = await this.page(platform, endpoint, { ...params, limit, cursor });
      seen += page.items.length;
      yield page;
      if (!page.nextCursor) return;
      cursor = page.nextCursor;
    }
  }

  /** A call in `csv` or `text` format: the body comes back as a string. */
  async raw(platform: Platform, endpoint: EndpointName, params: ListParams & { format: 'csv' | 'text' }): Promise<RawResult> {
    const spec = findEndpoint(platform, endpoint);
    if (!spec) throw localError(`no endpoint ${platform}/${endpoint}`, 'endpoint');
    const response = await this.send('GET', this.contentPath(spec), { ...this.contentQuery(spec, params), format: params.format });
    const requestId = header(response.headers, 'x-request-id') ?? '';
    const hasMore = header(response.headers, 'x-has-more');
    const units = spec.shape === 'list' ? countCsvRows(response.text) : 1;
    return Object.assign(this.report(spec, response, requestId, units), {
      text: response.text,
      contentType: header(response.headers, 'content-type') ?? '',
      nextCursor: header(response.headers, 'x-next-cursor'),
      hasMore: hasMore === undefined ? undefined : hasMore === 'true',
    });
  }

  // ---- jobs -----------------------------------------------------------------------------------------

  /**
   * Starts a large pull (limit above 50, up to 10,000). Free; charged once, when it completes, under
   * the request id of this call (returned as `requestId`).
   */
  async startJob(platform: Platform, endpoint: ListEndpoint, params: ListParams & { limit: number }, options: CallOptions = {}): Promise<{ job: Job; requestId: string }> {
    const spec = this.spec(platform, endpoint, 'list');
    if (params.limit <= PAGE_LIMITS.maxSynchronous || params.limit > PAGE_LIMITS.maxJob) {
      throw localError(`a job takes a limit from ${PAGE_LIMITS.maxSynchronous + 1} to ${PAGE_LIMITS.maxJob}, got ${params.limit}`, 'limit');
    }
    const response = await this.send('GET', this.contentPath(spec), this.contentQuery(spec, params), undefined, options);
    if (response.status !== 202) throw this.unexpected(response, `expected 202 with a job for limit ${params.limit}`);
    const body = this.parse(response, JOB_ENVELOPE, spec) as { data: Job; request_id: string };
    return { job: body.data, requestId: body.request_id };
  }

  async getJob(jobId: string): Promise<Job> {
    const response = await this.send('GET', `/jobs/${encodeURIComponent(jobId)}`, {});
    return (this.parse(response, JOB_ENVELOPE) as { data: Job }).data;
  }

  /**
   * Waits until the job completes or fails. A `job.completed` webhook (through `completions`)
   * wakes it at once; otherwise it polls with backoff. Polling is free.
   */
  async waitForJob(jobId: string, options: JobWaitOptions = {}): Promise<Job> {
    const deadline = Date.now() + (options.timeoutMs ?? 30 * 60_000);
    let delay = options.pollMinMs ?? 250;
    const maxDelay = options.pollMaxMs ?? (options.completions ? 30_000 : 5_000);
    for (;;) {
      const job = await this.getJob(jobId);
      if (job.status === 'completed' || job.status === 'failed') return job;
      if (Date.now() >= deadline) throw new SocialApiError(`job ${jobId} is still ${job.status} after waiting`, { code: 'job_wait_timeout' });
      const timer = new AbortController();
      const wait = Math.min(delay, Math.max(0, deadline - Date.now()));
      await Promise.race([
        sleep(wait, undefined, { signal: timer.signal }).catch(() => undefined),
        options.completions?.wait(jobId, timer.signal) ?? new Promise<void>(() => undefined),
      ]);
      timer.abort();
      delay = Math.min(delay * 2, maxDelay);
    }
  }

  /** Pages of a completed job's results (free), up to 1,000 items a page. */
  async *jobResults(jobId: string, options: { pageSize?: number; cursor?: string } = {}): AsyncGenerator<JobResultsPage> {
    let cursor = options.cursor;
    const limit = Math.min(options.pageSize ?? PAGE_LIMITS.jobResultsMax, PAGE_LIMITS.jobResultsMax);
    for (;;) {
      const response = await this.send('GET', `/jobs/${encodeURIComponent(jobId)}/results`, { limit: String(limit), ...(cursor ? { cursor } : {}) });
      const body = this.parse(response, JOB_RESULTS_ENVELOPE);
      const nextCursor = body.meta.has_more ? body.meta.cursor : undefined;
      yield { items: body.data, meta: body.meta, nextCursor, requestId: body.request_id };
      if (!nextCursor) return;
      cursor = nextCursor;
    }
  }

  // ---- webhooks -------------------------------------------------------------------------------------

  async createWebhook(url: string, events: WebhookEvent[]): Promise<CreatedWebhookEndpoint> {
    const response = await this.send('POST', '/webhooks', {}, JSON.stringify({ url, events }));
    return (this.parse(response, CREATED_WEBHOOK_ENVELOPE) as { data: CreatedWebhookEndpoint }).data;
  }

  /**
   * A media file from a download's `media_url`, a link that lives at most an hour: its bytes and
   * type. Not a billed call, and not the API's origin in general (a CDN's), so not through the
   * API's pool or rate gate. Transient failures (network, 5xx, 429) are tried again by the API
   * calls' retry policy, within the deadline. The link is never put in an error: it is a
   * credential while it lives.
   */
  async fetchMedia(url: string, options: { deadlineMs?: number } = {}): Promise<{ bytes: Buffer; contentType: string }> {
    const deadline = AbortSignal.timeout(options.deadlineMs ?? 60_000);
    return withRetries(async () => {
      let answer: Dispatcher.ResponseData;
      try {
        answer = await request(url, { method: 'GET', signal: deadline });
      } catch (error) {
        const code = (error as { code?: string }).code ?? 'network_error';
        throw new NetworkError(`the media link could not be fetched: ${code}`, { code: 'network_error', cause: error });
      }
      if (answer.statusCode >= 400) {
        await answer.body.dump();
        const message = `the media link answered ${answer.statusCode}`;
        if (answer.statusCode === 410) throw new MediaExpiredError(`${message}: it has expired`, { status: 410, code: 'media_expired' });
        if (answer.statusCode >= 500 || answer.statusCode === 429) throw new ServerError(message, { status: answer.statusCode, code: 'media_unavailable' });
        throw new SocialApiError(message, { status: answer.statusCode, code: 'media_unavailable' });
      }
      const contentType = header(answer.headers, 'content-type') ?? 'application/octet-stream';
      return { bytes: Buffer.from(await answer.body.arrayBuffer()), contentType };
    }, this.retry);
  }

  /** The API's clock, read from the Date header of a free call (this machine's when it has none). */
  async serverTime(): Promise<Date> {
    return apiTime((await this.send('GET', '/webhooks', {})).headers);
  }

  async listWebhooks(): Promise<WebhookEndpoint[]> {
    const response = await this.send('GET', '/webhooks', {});
    return (this.parse(response, WEBHOOKS_ENVELOPE) as { data: WebhookEndpoint[] }).data;
  }

  async deleteWebhook(webhookId: string): Promise<void> {
    const response = await this.send('DELETE', `/webhooks/${encodeURIComponent(webhookId)}`, {});
    if (response.status !== 204) throw this.unexpected(response, 'expected 204 No Content');
  }

  // ---- internals ------------------------------------------------------------------------------------

  private spec(platform: Platform, endpoint: EndpointName, shape: EndpointSpec['shape']): EndpointSpec {
    const spec = findEndpoint(platform, endpoint);
    if (!spec || spec.shape !== shape) throw localError(`${platform}/${endpoint} is not ${shape === 'list' ? 'a list' : 'an object'} endpoint of the API`, 'endpoint');
    return spec;
  }

  private contentPath(spec: EndpointSpec): string {
    return `/${this.platformPaths[spec.platform]}/${spec.name}`;
  }

  /** Checks the identifying parameter locally, so a call that could only fail costs no request. */
  private contentQuery(spec: EndpointSpec, params: ListParams): Record<string, string> {
    const value = params[spec.param];
    if (value === undefined || value === '') throw localError(`${endpointKey(spec)} needs --${spec.param}`, spec.param);
    const query: Record<string, string> = { [spec.param]: value };
    if (params.fresh) query.fresh = 'true';
    if (params.limit !== undefined) query.limit = String(params.limit);
    if (params.cursor !== undefined) query.cursor = params.cursor;
    return query;
  }

  private async send(method: 'GET' | 'POST' | 'DELETE', path: string, query: Record<string, string>, body?: string, options: CallOptions = {}): Promise<RawResponse> {
    // Joined by hand rather than through URLSearchParams, which costs more per call than the rest
    // of the request's preparation together (the client's overhead is benchmarked per call).
    let fullPath = `${this.basePath}${path}`;
    let separator = '?';
    for (const name in query) {
      fullPath += `${separator}${encodeURIComponent(name)}=${encodeURIComponent(query[name] as string)}`;
      separator = '&';
    }
    const headers = body === undefined ? this.headers : { ...this.headers, 'content-type': 'application/json' };
    const deadlineMs = options.deadlineMs ?? this.options.callDeadlineMs ?? DEFAULT_CALL_DEADLINE_MS;
    // One timer for the whole call: a slow drip of bytes resets undici's body timeout at every
    // chunk, so only a deadline over all of it bounds how long a sender can hold the call.
    const deadline = AbortSignal.timeout(deadlineMs);
    /** What the attempts before the deadline were answered (5xx, 429) or why they failed: a deadline's cause, named in its error. */
    let earlier: string[] | undefined;
    const pastDeadline = (cause?: unknown) =>
      new CallDeadlineError(`${method} ${path}: no whole answer within the call's deadline of ${deadlineMs} ms${earlierAttemptsText(earlier)}`, { code: 'call_deadline', cause });
    /** The last attempt's failure, when its answer was lost after the request left. */
    let lost: NetworkError | undefined;
    return withRetries(
      async () => {
        const passing = this.rateGate.pass(this.options.callerOf?.());
        const pass = typeof passing === 'number' ? passing : await passing;
        if (deadline.aborted) {
          this.rateGate.unsent();
          // Nothing is sent now; unless the last attempt's answer was lost (it may have been
          // charged), the call's open attempt was answered with an error status: never charged.
          const unsent = pastDeadline(lost);
          unsent.unchargedAttempt = lost === undefined;
          throw unsent;
        }
        if (lost) {
          try {
            await options.beforeRepeat?.(lost);
          } catch (error) {
            this.rateGate.unsent();
            throw error;
          }
        }
        lost = undefined;
        let response: RawResponse;
        try {
          const answer = await this.pool.request({ method, path: fullPath, headers, body, signal: deadline });
          response = { status: answer.statusCode, headers: answer.headers, text: await answer.body.text() };
        } catch (error) {
          this.rateGate.answer(pass);
          // Past the deadline nothing is tried again; the attempt that ran into it may have been charged.
          if (deadline.aborted) throw pastDeadline(error);
          const code = (error as { code?: string }).code ?? 'network_error';
          const failure = new NetworkError(`${method} ${path}: ${code}: ${(error as Error).message}`, { code: 'network_error', cause: error });
          if (!failure.neverSent) lost = failure;
          (earlier ??= []).push(code);
          throw failure;
        }
        this.rateGate.answer(pass, response.status, response.headers);
        if (response.status >= 400) {
          const failure = errorFromResponse(response.status, response.text, response.headers);
          if (failure.retryable) (earlier ??= []).push(`${response.status}${failure.requestId ? ` (request ${failure.requestId})` : ''}`);
          throw failure;
        }
        return response;
      },
      this.retry,
      (error, attempt) => {
        this.options.logger?.warn({ path, attempt, code: error.code, status: error.status, requestId: error.requestId }, 'retrying API call');
        options.onRetry?.(error);
      },
    );
  }

  /** Turns a problem found in an answer of the right shape into the call's failure. */
  private check(response: RawResponse, spec: EndpointSpec, problem: string | undefined): void {
    if (problem !== undefined) throw this.unexpected(response, `${endpointKey(spec)}: ${problem}`);
  }

  private parse<S extends z.ZodType>(response: RawResponse, schema: S, spec?: EndpointSpec): z.infer<S> {
    let json: unknown;
    try {
      json = JSON.parse(response.text);
    } catch {
      throw this.unexpected(response, 'the body is not JSON');
    }
    const checked = schema.safeParse(json);
    if (!checked.success) {
      const where = checked.error.issues.slice(0, 3).map((issue) => `${issue.path.join('.') || '(body)'}: ${issue.message}`).join('; ');
      throw this.unexpected(response, `${spec ? `${endpointKey(spec)}: ` : ''}unexpected shape: ${where}`);
    }
    return checked.data;
  }

  /** An answer refused: it is not data. It carries what the API said it charged for it. */
  private unexpected(response: RawResponse, message: string): ResponseValidationError {
    const requestId = header(response.headers, 'x-request-id');
    const charged = Number(header(response.headers, 'x-credits-charged'));
    return new ResponseValidationError(`${message}${requestId ? ` (request ${requestId})` : ''}`, {
      status: response.status,
      code: 'unexpected_response',
      requestId,
      rawBody: response.text,
      ...(Number.isInteger(charged) && charged >= 0 ? { creditsCharged: charged } : {}),
    });
  }

  private report(spec: EndpointSpec, response: RawResponse, requestId: string, units: number): CallReport {
    const endpoint = endpointKey(spec);
    const creditsCharged = Number(header(response.headers, 'x-credits-charged') ?? 0);
    const remaining = header(response.headers, 'x-credits-remaining');
    const creditsExpected = units * this.options.prices[endpoint];
    if (creditsCharged !== creditsExpected) {
      this.options.logger?.warn({ endpoint, requestId, units, creditsCharged, creditsExpected }, 'credits charged differ from the price table');
    }
    const cache = header(response.headers, 'x-cache');
    return {
      endpoint,
      requestId,
      creditsCharged,
      creditsExpected,
      creditsRemaining: remaining === undefined ? undefined : Number(remaining),
      cache: cache === 'HIT' || cache === 'MISS' ? cache : undefined,
      answeredAt: apiTime(response.headers),
    };
  }
}

/** The API's clock at an answer: its Date header, or this machine's clock when it has none. */
function apiTime(headers: Record<string, string | string[] | undefined>): Date {
  const date = Date.parse(header(headers, 'date') ?? '');
  return new Date(Number.isNaN(date) ? Date.now() : date);
}

/**
 * What is wrong with a list page of the right shape: more items than asked for, or items without
 * an id or with the same id twice (ids are how the warehouse tells items apart).
 */
function listAnswerProblem(limit: number, items: readonly { id: string }[]): string | undefined {
  if (items.length > limit) return `the page holds ${items.length} items, more than the limit of ${limit} asked for`;
  const ids = new Set<string>();
  for (const [index, item] of items.entries()) {
    if (item.id === '') return `item ${index} has an empty id`;
    if (ids.has(item.id)) return `item ${index} repeats the id ${JSON.stringify(item.id)}`;
    ids.add(item.id);
  }
  return undefined;
}

/**
 * What is wrong with an object answer of the right shape: it is about another item or account
 * than the one asked for, where the answer names it (the item's id as its URL gives it, the
 * profile's handle).
 */
function objectAnswerProblem(spec: EndpointSpec, params: ContentParams, data: unknown): string | undefined {
  const answer = data as { entity_id?: string; handle?: string };
  if (params.url !== undefined && answer.entity_id !== undefined) {
    const asked = parseContentUrl(spec.platform, params.url)?.itemId;
    if (asked !== undefined && answer.entity_id !== asked) return `the answer is about item ${JSON.stringify(answer.entity_id)}, not ${JSON.stringify(asked)} as asked`;
  }
  if (params.handle !== undefined && answer.handle !== undefined && answer.handle.toLowerCase() !== params.handle.replace(/^@/, '').toLowerCase()) {
    return `the answer is about account ${JSON.stringify(answer.handle)}, not ${JSON.stringify(params.handle)} as asked`;
  }
  return undefined;
}

/** How many earlier attempts a deadline's error names one by one; the rest are counted. */
const EARLIER_ATTEMPTS_NAMED = 5;

/**
 * The attempts a call made before its deadline ran out, as its error says them: each one's answer
 * (status and request id) or network error, so a deadline reached by retrying 5xx answers names them.
 */
function earlierAttemptsText(earlier: string[] | undefined): string {
  if (!earlier || earlier.length === 0) return '';
  const named = earlier.slice(-EARLIER_ATTEMPTS_NAMED);
  const more = earlier.length - named.length;
  return `; before it, ${earlier.length} attempt${earlier.length === 1 ? '' : 's'} ended in ${named.join(', ')}${more > 0 ? ` (the last ${named.length}; ${more} more before them)` : ''}`;
}

function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function localError(message: string, param: string): InvalidRequestError {
  return new InvalidRequestError(message, { code: 'invalid_argument', param });
}

/** Data rows of a CSV page: lines after the header (captions never hold line breaks). */
function countCsvRows(text: string): number {
  return Math.max(0, text.split('\r\n').filter((line) => line !== '').length - 1);
}
