/**
 * Typed errors of the API client, one class per kind of failure, each with a stable `code`, the
 * HTTP status where there was one, and the API's request_id, so callers can branch on the class
 * and operators can quote the request_id to the API's support.
 */

export interface ApiErrorDetails {
  status?: number;
  /** The API's error code (e.g. `cursor_expired`) or the client's own (e.g. `network_error`). */
  code: string;
  requestId?: string;
  param?: string;
  /** The raw body, for answers the client could not understand. */
  rawBody?: string;
  /** What the API said it charged for an answer the client refused (X-Credits-Charged). */
  creditsCharged?: number;
  cause?: unknown;
}

export class SocialApiError extends Error {
  override name = 'SocialApiError';
  readonly status: number | undefined;
  readonly code: string;
  readonly requestId: string | undefined;
  readonly param: string | undefined;
  readonly rawBody: string | undefined;
  readonly creditsCharged: number | undefined;
  /** Whether the same call may succeed if made again: the client retries only these. */
  readonly retryable: boolean = false;

  constructor(message: string, details: ApiErrorDetails) {
    super(message, { cause: details.cause });
    this.status = details.status;
    this.code = details.code;
    this.requestId = details.requestId;
    this.param = details.param;
    this.rawBody = details.rawBody;
    this.creditsCharged = details.creditsCharged;
  }
}

/**
 * A call refused before it was sent: a budget across runs that covers its run cannot take its
 * worst case (src/harvest/budgets.ts). Never charged; the run stops, naming the budget.
 */
export class BudgetSpentError extends SocialApiError {
  override name = 'BudgetSpentError';
  constructor(
    message: string,
    /** The budget that refused the call. */
    readonly budget: string,
  ) {
    super(message, { code: 'budget_spent' });
  }
}

/** 401: the key is missing or not valid. */
export class AuthenticationError extends SocialApiError {
  override name = 'AuthenticationError';
}

/** 400 (and 405, 409, 410, 413, 415): the request is wrong or cannot be served as asked. */
export class InvalidRequestError extends SocialApiError {
  override name = 'InvalidRequestError';
}

/** 400 `cursor_expired`: cursors are short-lived; start the listing again from the top. */
export class CursorExpiredError extends InvalidRequestError {
  override name = 'CursorExpiredError';
}

/** 410 from a media link: it lived its hour; the download endpoint gives a new one. */
export class MediaExpiredError extends SocialApiError {
  override name = 'MediaExpiredError';
}

/** 404: the content item, handle, job or webhook does not exist. A fact, not a crash. */
export class NotFoundError extends SocialApiError {
  override name = 'NotFoundError';
}

/** 402: the balance cannot cover the call's worst case. Nothing was charged. */
export class InsufficientCreditsError extends SocialApiError {
  override name = 'InsufficientCreditsError';
  constructor(
    message: string,
    details: ApiErrorDetails,
    readonly requiredCredits: number | undefined,
    readonly remainingCredits: number | undefined,
  ) {
    super(message, details);
  }
}

/** 429: over the rate limit. Retried after Retry-After. */
export class RateLimitedError extends SocialApiError {
  override name = 'RateLimitedError';
  override readonly retryable = true;
  constructor(
    message: string,
    details: ApiErrorDetails,
    readonly retryAfterMs: number | undefined,
  ) {
    super(message, details);
  }
}

/** 5xx: a transient server fault. Retried with backoff. */
export class ServerError extends SocialApiError {
  override name = 'ServerError';
  override readonly retryable = true;
}

/**
 * No whole answer within the call's overall deadline (headers held back, a body dripped slowly):
 * the client makes no further attempt, as the deadline covers them all, but the call may succeed
 * if made again later, so it is retryable for its caller (an activity, which Temporal retries).
 * The attempt that ran into the deadline may have been charged.
 */
export class CallDeadlineError extends SocialApiError {
  override name = 'CallDeadlineError';
  override readonly retryable = true;
  /**
   * Set when the deadline ran out before an attempt was sent and the attempt before it (if any)
   * was answered with an error status: then no attempt the call's journal holds open can have
   * been charged.
   */
  unchargedAttempt = false;
}

/** 503 `download_unavailable`: the feature is switched off; asking again would only fail again. */
export class FeatureUnavailableError extends SocialApiError {
  override name = 'FeatureUnavailableError';
}

/** The API could not be reached, or the connection broke or timed out. Retried with backoff. */
export class NetworkError extends SocialApiError {
  override name = 'NetworkError';
  override readonly retryable = true;

  /**
   * Whether the request never left: the connection was refused, the host not found, or the
   * connect timed out. Such a call cannot have been charged; after any other network error (a
   * reset, a timeout waiting for the answer) it may have been.
   */
  get neverSent(): boolean {
    return NOT_SENT_CODES.has(String((this.cause as { code?: string } | undefined)?.code));
  }
}

/**
 * Whether the API cannot have charged a call that failed: it answered with an error status (a
 * failed call is never charged), or the request never left. A dropped connection or an answer of
 * the wrong shape may have been charged.
 */
export function neverCharged(error: unknown): boolean {
  if (error instanceof BudgetSpentError) return true;
  if (error instanceof NetworkError) return error.neverSent;
  if (error instanceof CallDeadlineError) return error.unchargedAttempt;
  return error instanceof SocialApiError && error.status !== undefined && error.status >= 400;
}

const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

/** The answer does not have the shape the spec gives; it carries the raw body and request_id. */
export class ResponseValidationError extends SocialApiError {
  override name = 'ResponseValidationError';
}

interface ErrorBody {
  error?: { code?: unknown; message?: unknown; param?: unknown; required_credits?: unknown; remaining_credits?: unknown };
  request_id?: unknown;
}

/** Builds the typed error for an HTTP error answer. */
export function errorFromResponse(status: number, rawBody: string, headers: Record<string, string | string[] | undefined>): SocialApiError {
  let body: ErrorBody = {};
  try {
    body = JSON.parse(rawBody) as ErrorBody;
  } catch {
    // Not JSON (a proxy's HTML page, say): keep the raw body on the error.
  }
  const code = typeof body.error?.code === 'string' ? body.error.code : `http_${status}`;
  const apiMessage = typeof body.error?.message === 'string' ? body.error.message : `HTTP ${status}`;
  const requestId = typeof body.request_id === 'string' ? body.request_id : headerText(headers['x-request-id']);
  const details: ApiErrorDetails = {
    status,
    code,
    requestId,
    param: typeof body.error?.param === 'string' ? body.error.param : undefined,
    rawBody: body.error ? undefined : rawBody,
  };
  const message = `${code}: ${apiMessage}${requestId ? ` (request ${requestId})` : ''}`;
  if (status === 401) return new AuthenticationError(message, details);
  if (status === 402) {
    const number = (value: unknown) => (typeof value === 'number' ? value : undefined);
    return new InsufficientCreditsError(message, details, number(body.error?.required_credits), number(body.error?.remaining_credits));
  }
  if (status === 404) return new NotFoundError(message, details);
  if (status === 429) {
    const seconds = Number(headerText(headers['retry-after']));
    return new RateLimitedError(message, details, Number.isFinite(seconds) ? seconds * 1000 : undefined);
  }
  if (code === 'cursor_expired') return new CursorExpiredError(message, details);
  if (code === 'download_unavailable') return new FeatureUnavailableError(message, details);
  if (status >= 500) return new ServerError(message, details);
  return new InvalidRequestError(message, details);
}

function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** How many earlier attempts a deadline's error names one by one; the rest are counted. */
const EARLIER_ATTEMPTS_NAMED = 5;

/**
 * The attempts a call made before its deadline ran out, as its error says them: each one's answer
 * (status and request id) or network error, so a deadline reached by retrying 5xx answers names them.
 */
export function earlierAttemptsText(earlier: string[] | undefined): string {
  if (!earlier || earlier.length === 0) return '';
  const named = earlier.slice(-EARLIER_ATTEMPTS_NAMED);
  const more = earlier.length - named.length;
  return `; before it, ${earlier.length} attempt${earlier.length === 1 ? '' : 's'} ended in ${named.join(', ')}${more > 0 ? ` (the last ${named.length}; ${more} more before them)` : ''}`;
}
