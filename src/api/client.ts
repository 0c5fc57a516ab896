/**
 * The typed client of the Social Content Data API: the one door every harvest spends money
 * through. It knows every endpoint and its price, validates every answer against the spec's
 * schemas, retries only what is safe to retry, and reports what each call cost.
 */
import { Pool, type Dispatcher } from 'undici';
import { z } from 'zod';
import type { Logger } from '../logger.js';
import { PAGE_LIMITS, endpointKey, findEndpoint, type EndpointKey, type EndpointName, type EndpointSpec, type Platform, type PriceTable, type WebhookEvent } from '../api-catalog/endpoints.js';
import {
  createdWebhookEndpointSchema,
  envelopeSchema,
  jobSchema,
  LIST_ITEM_SCHEMAS,
  listEnvelopeSchema,
  OBJECT_SCHEMAS,
  webhookEndpointSchema,
  type CreatedWebhookEndpoint,
  type Job,
  type ListMeta,
  type WebhookEndpoint,
} from '../api-catalog/resources.js';
import { normalBaseUrl, type ApiIdentity } from '../api-catalog/api-identity.js';
import { apiIdentity, keyFingerprint } from './identity.js';
import { apiTime, countCsvRows, header, listAnswer, objectAnswer, parseAnswer, refusedAnswer, type RawResponse } from './answers.js';
import { CallDeadlineError, earlierAttemptsText, InvalidRequestError, NetworkError, SocialApiError, errorFromResponse } from './errors.js';
import { waitForJob, type JobWaitOptions } from './job-wait.js';
import { fenceAtWrite, fencedRequest, Unsent } from './fence-at-write.js';
import { fetchMedia } from './media.js';
import { RateGate } from './rate-gate.js';
import { DEFAULT_RETRY_POLICY, withRetries, type RetryPolicy } from './retry.js';

export type ObjectEndpoint = keyof typeof OBJECT_SCHEMAS;
export type ListEndpoint = keyof typeof LIST_ITEM_SCHEMAS;
export type ObjectData = { [E in ObjectEndpoint]: z.infer<(typeof OBJECT_SCHEMAS)[E]> };
export type ListItem = { [E in ListEndpoint]: z.infer<(typeof LIST_ITEM_SCHEMAS)[E]> };

// Envelope schemas are built once: building a zod schema costs more than checking an answer.
const OBJECT_ENVELOPES = envelopesOf(OBJECT_SCHEMAS, envelopeSchema);
const LIST_ENVELOPES = envelopesOf(LIST_ITEM_SCHEMAS, listEnvelopeSchema);
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
  /**
   * Called right before each attempt goes on the wire, after the rate gate, any backoff and
   * `beforeRepeat`: the caller's fence (a work that lost its claim throws, and the attempt is not
   * sent). What it throws is the call's error, as it was thrown; the client tries nothing again.
   */
  beforeSend?: () => void | Promise<void>;
}

/** How long a call may take in all, its retries included, unless the caller says otherwise. */
export const DEFAULT_CALL_DEADLINE_MS = 120_000;

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

export class SocialApiClient {
  private readonly pool: Pool;
  /** The pool, each fenced request checked once more as it is written (fence-at-write.ts). */
  private readonly dispatcher: Dispatcher;
  private readonly basePath: string;
  private readonly retry: RetryPolicy;
  private readonly platformPaths: Record<Platform, string>;
  private readonly headers: Record<string, string>;
  private readonly rateGate: RateGate;

  constructor(private readonly options: ClientOptions) {
    const base = new URL(normalBaseUrl(options.baseUrl));
    this.basePath = base.pathname;
    this.pool = new Pool(base.origin, {
      connections: options.connections ?? null,
      connectTimeout: options.timeouts?.connectMs ?? 10_000,
      headersTimeout: options.timeouts?.headersMs ?? 60_000,
      bodyTimeout: options.timeouts?.bodyMs ?? 60_000,
      keepAliveTimeout: 30_000,
    });
    this.dispatcher = this.pool.compose(fenceAtWrite);
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
    const body = objectAnswer(response, OBJECT_ENVELOPES[endpoint], spec, params) as { data: unknown; request_id: string };
    return Object.assign(this.report(spec, response, body.request_id, 1), { data: body.data as ObjectData[E] });
  }

  /** One page of a list endpoint (limit at most PAGE_LIMITS.maxSynchronous; larger pulls go through `startJob`). */
  async page<E extends ListEndpoint>(platform: Platform, endpoint: E, params: ListParams, options: CallOptions = {}): Promise<PageResult<ListItem[E]>> {
    const spec = this.spec(platform, endpoint, 'list');
    if (params.limit !== undefined && params.limit > PAGE_LIMITS.maxSynchronous) {
      throw localError(`a page holds at most ${PAGE_LIMITS.maxSynchronous} items (got limit ${params.limit}); use startJob for larger pulls`, 'limit');
    }
    const response = await this.send('GET', this.contentPath(spec), this.contentQuery(spec, params), undefined, options);
    const body = listAnswer(response, LIST_ENVELOPES[endpoint], spec, params.limit ?? PAGE_LIMITS.defaultLimit) as z.infer<ReturnType<typeof listEnvelopeSchema>>;
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
   * Starts a large pull (limit above PAGE_LIMITS.maxSynchronous, up to PAGE_LIMITS.maxJob). Free; charged once, when it completes, under
   * the request id of this call (returned as `requestId`).
   */
  async startJob(platform: Platform, endpoint: ListEndpoint, params: ListParams & { limit: number }, options: CallOptions = {}): Promise<{ job: Job; requestId: string }> {
    const spec = this.spec(platform, endpoint, 'list');
    if (params.limit <= PAGE_LIMITS.maxSynchronous || params.limit > PAGE_LIMITS.maxJob) {
      throw localError(`a job takes a limit from ${PAGE_LIMITS.maxSynchronous + 1} to ${PAGE_LIMITS.maxJob}, got ${params.limit}`, 'limit');
    }
    const response = await this.send('GET', this.contentPath(spec), this.contentQuery(spec, params), undefined, options);
    if (response.status !== 202) throw refusedAnswer(response, `expected 202 with a job for limit ${params.limit}`);
    const body = parseAnswer(response, JOB_ENVELOPE, spec) as { data: Job; request_id: string };
    return { job: body.data, requestId: body.request_id };
  }

  async getJob(jobId: string): Promise<Job> {
    const response = await this.send('GET', `/jobs/${encodeURIComponent(jobId)}`, {});
    return (parseAnswer(response, JOB_ENVELOPE) as { data: Job }).data;
  }

  /** Waits until the job completes or fails: src/api/job-wait.ts. */
  async waitForJob(jobId: string, options: JobWaitOptions = {}): Promise<Job> {
    return waitForJob((id) => this.getJob(id), jobId, options);
  }

  /** Pages of a completed job's results (free), up to 1,000 items a page. */
  async *jobResults(jobId: string, options: { pageSize?: number; cursor?: string } = {}): AsyncGenerator<JobResultsPage> {
    let cursor = options.cursor;
    const limit = Math.min(options.pageSize ?? PAGE_LIMITS.jobResultsMax, PAGE_LIMITS.jobResultsMax);
    for (;;) {
      const response = await this.send('GET', `/jobs/${encodeURIComponent(jobId)}/results`, { limit: String(limit), ...(cursor ? { cursor } : {}) });
      const body = parseAnswer(response, JOB_RESULTS_ENVELOPE);
      const nextCursor = body.meta.has_more ? body.meta.cursor : undefined;
      yield { items: body.data, meta: body.meta, nextCursor, requestId: body.request_id };
      if (!nextCursor) return;
      cursor = nextCursor;
    }
  }

  // ---- webhooks -------------------------------------------------------------------------------------

  async createWebhook(url: string, events: WebhookEvent[]): Promise<CreatedWebhookEndpoint> {
    const response = await this.send('POST', '/webhooks', {}, JSON.stringify({ url, events }));
    return (parseAnswer(response, CREATED_WEBHOOK_ENVELOPE) as { data: CreatedWebhookEndpoint }).data;
  }

  /** A media file from a download's `media_url`: src/api/media.ts. */
  async fetchMedia(url: string, options: { deadlineMs?: number } = {}): Promise<{ bytes: Buffer; contentType: string }> {
    return fetchMedia(url, this.retry, options);
  }

  /** The API's clock, read from the Date header of a free call (this machine's when it has none). */
  async serverTime(options: Pick<CallOptions, 'deadlineMs'> = {}): Promise<Date> {
    return apiTime((await this.send('GET', '/webhooks', {}, undefined, options)).headers);
  }

  async listWebhooks(): Promise<WebhookEndpoint[]> {
    const response = await this.send('GET', '/webhooks', {});
    return (parseAnswer(response, WEBHOOKS_ENVELOPE) as { data: WebhookEndpoint[] }).data;
  }

  async deleteWebhook(webhookId: string): Promise<void> {
    const response = await this.send('DELETE', `/webhooks/${encodeURIComponent(webhookId)}`, {});
    if (response.status !== 204) throw refusedAnswer(response, 'expected 204 No Content');
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
        try {
          if (lost) await options.beforeRepeat?.(lost);
        } catch (error) {
          this.rateGate.unsent();
          throw error;
        }
        lost = undefined;
        let response: RawResponse;
        try {
          const request = { method, path: fullPath, headers, body, signal: deadline };
          const answer = await (options.beforeSend ? fencedRequest(this.dispatcher, request, options.beforeSend, (lapse) => this.options.logger?.warn({ path }, lapse.message)) : this.pool.request(request));
          response = { status: answer.statusCode, headers: answer.headers, text: await answer.body.text() };
        } catch (error) {
          if (error instanceof Unsent) {
            this.rateGate.unsent();
            throw error.cause;
          }
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

function localError(message: string, param: string): InvalidRequestError {
  return new InvalidRequestError(message, { code: 'invalid_argument', param });
}

function envelopesOf<E extends string>(schemas: Record<E, z.ZodType>, envelope: (schema: z.ZodType) => z.ZodType): Record<E, z.ZodType> {
  return Object.fromEntries(Object.entries<z.ZodType>(schemas).map(([endpoint, schema]) => [endpoint, envelope(schema)])) as Record<E, z.ZodType>;
}
