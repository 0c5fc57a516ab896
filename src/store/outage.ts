/**
 * Outages of the services a shared store stands on: the PostgreSQL catalog and the object store.
 * A service that does not answer (refused or dropped connections, a server starting up or shutting
 * down, an object store answering 5xx) is an outage to wait out, not a failure of the work: the
 * work waits, with backoff, up to a bound the operator sets (HARVESTER_OUTAGE_WAIT_SECONDS, 10
 * minutes by default), and says so in the log. What is permanent (a refused password, a missing
 * bucket, a full disk) is no outage, and fails at once as before.
 *
 * Errors are told apart by their names and codes, not by importing the shared store's classes:
 * this module is loaded by every store, and the shared one's clients (pg, the AWS SDK) only when
 * asked for (store-from-environment.ts).
 */
import pRetry from 'p-retry';
import { EnvironmentError } from '../config/environment.js';

export type OutageService = 'catalog' | 'object store';

/** An outage as a message says it: which service, and its own words. */
export interface Outage {
  service: OutageService;
  message: string;
}

/** Node's codes for a peer that is not there, or that dropped the connection. */
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ECONNABORTED', 'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT']);

/**
 * PostgreSQL's SQLSTATEs of a server that is going, coming back or full: class 08 (connection
 * exception), 57P01-57P03 (admin shutdown, crash shutdown, cannot connect now), 53300 (too many
 * connections), 40001/40P01 are not here (they are answers, retried by their callers).
 */
function isUnavailableSqlState(code: string): boolean {
  return code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03' || code === '53300';
}

/** node-postgres's own words for a connection that ended under a query (it gives them no code). */
const PG_DROPPED = /Connection terminated|connection timeout|Client has encountered a connection error|the database system is (starting up|shutting down|in recovery mode)/i;

/** The AWS SDK's names of a store that did not answer, or answered that it cannot now. */
const OBJECT_STORE_UNAVAILABLE = new Set(['TimeoutError', 'RequestTimeout', 'ServiceUnavailable', 'SlowDown', 'InternalError', 'XMinioServerNotInitialized']);

/**
 * DuckDB's words (the warehouse's loads and queries reach the catalog and the object store through
 * its postgres and httpfs extensions, whose errors carry no code): a connection refused or cut.
 */
const DUCKDB_UNREACHABLE = /connection refused|could not connect|unable to connect|connection reset|server closed the connection|terminating connection|could not establish connection|the database system is (starting up|shutting down)|Connection terminated/i;

function causes(error: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let at: unknown = error; at !== undefined && at !== null && chain.length < 8; at = (at as { cause?: unknown }).cause) chain.push(at);
  return chain;
}

function isUnreachable(error: unknown): boolean {
  const { code, name, message, $metadata } = error as { code?: unknown; name?: unknown; message?: unknown; $metadata?: { httpStatusCode?: number } };
  if (typeof code === 'string' && (UNREACHABLE_CODES.has(code) || (/^[0-9A-Z]{5}$/.test(code) && isUnavailableSqlState(code)))) return true;
  if (typeof name === 'string' && OBJECT_STORE_UNAVAILABLE.has(name)) return true;
  const status = $metadata?.httpStatusCode;
  if (status !== undefined && status >= 500) return true;
  return typeof message === 'string' && PG_DROPPED.test(message);
}

/**
 * The outage `error` reports, if it is one: a CatalogError or ObjectStorageError (src/store/shared)
 * whose cause is a service that does not answer, or a DuckDB error that says so. Undefined for
 * anything else, an outage that already outlasted its wait included.
 */
export function outageOf(error: unknown): Outage | undefined {
  if (!(error instanceof Error) || error instanceof OutageTooLongError) return undefined;
  const message = error.message;
  if (error.name === 'CatalogError' || error.name === 'ObjectStorageError') {
    if (!causes(error).slice(1).some(isUnreachable)) return undefined;
    return { service: error.name === 'CatalogError' ? 'catalog' : 'object store', message };
  }
  // A DuckDB error (the loader's, a query's) names the service in its words.
  if (DUCKDB_UNREACHABLE.test(message) && /duckdb|postgres|catalog|IO Error|HTTP/i.test(`${error.name} ${message}`)) {
    // PostgreSQL's words first: a lake's messages name its data path (s3://…) either way.
    const catalog = /Unable to connect to Postgres|connection to server at|database system is|server closed the connection|terminating connection/i.test(message);
    return { service: catalog || !/HTTP|s3:\/\//i.test(message) ? 'catalog' : 'object store', message };
  }
  return undefined;
}

/** An outage that lasted longer than the wait allowed: permanent for the work that met it. */
export class OutageTooLongError extends Error {
  override readonly name = 'OutageTooLong';
  constructor(
    readonly outage: Outage,
    waitedMs: number,
  ) {
    super(`the ${outage.service} did not answer for ${Math.round(waitedMs / 1_000)} s, the longest this worker waits (HARVESTER_OUTAGE_WAIT_SECONDS): ${outage.message}`);
  }
}

/** The bound on one outage's wait, by default: long enough for a database's restart or a failover. */
export const DEFAULT_OUTAGE_WAIT_MS = 10 * 60_000;

/** HARVESTER_OUTAGE_WAIT_SECONDS, checked; the default when unset. */
export function outageWaitMs(env: NodeJS.ProcessEnv = process.env): number {
  const value = env.HARVESTER_OUTAGE_WAIT_SECONDS;
  if (value === undefined || value === '') return DEFAULT_OUTAGE_WAIT_MS;
  const seconds = Number(value);
  if (!Number.isFinite(seconds) || seconds < 0) throw new EnvironmentError(`HARVESTER_OUTAGE_WAIT_SECONDS is ${JSON.stringify(value)}: give a number of seconds (0 waits for no outage)`);
  return seconds * 1_000;
}

export interface OutageWait {
  /** The longest one outage is waited out, in ms: then OutageTooLongError. */
  boundMs: number;
  /**
   * When the caller must have its answer (an activity attempt's own timeout, in ms since the
   * epoch): the wait stops there, throwing the outage's own error, which its caller may try again.
   */
  stopAtMs?: number;
  /** Told at each failed try while waiting (the first one included), and how long the outage has lasted so far. */
  waiting?: (outage: Outage, waitedMs: number) => void;
  /** Told once the service answers again, after a wait. */
  back?: (outage: Outage, waitedMs: number) => void;
  /** Backoff between tries: 250 ms, doubling, at most `maxDelayMs` (5 s by default). */
  maxDelayMs?: number;
  /** When each service's outage began, shared by the calls of one store (storeRidingOutages). */
  clock?: OutageClock;
}

/** An outage no call has met for this many of the longest backoffs is over: a failure after it begins another. */
const OUTAGE_FORGOTTEN_AFTER_BACKOFFS = 3;

/**
 * When each service's outage began, as the calls of one store have met it, so that the bound is
 * the outage's, not each call's: a work with calls queued behind an outage (a listing's items
 * waiting for their enrichment) met it afresh at each of them, and each waited a bound of its own,
 * six at a time; with a bound of 3 s the work failed after 82 s. A call that meets an outage the
 * store's calls met before waits what is left of the bound.
 */
export class OutageClock {
  private readonly outages = new Map<OutageService, { began: number; seen: number }>();

  /**
   * When the outage of `service` a call meets at `now` began: `now`, unless a call met it within
   * the last `forgetAfterMs` (while any call waits for it, one tries at least every longest backoff).
   */
  began(service: OutageService, now: number, forgetAfterMs: number): number {
    const known = this.outages.get(service);
    if (known && now - known.seen <= forgetAfterMs) {
      known.seen = now;
      return known.began;
    }
    this.outages.set(service, { began: now, seen: now });
    return now;
  }

  /** The service answered a call that waited for it: its outage is over. */
  ended(service: OutageService): void {
    this.outages.delete(service);
  }
}

/**
 * Runs `work`, and runs it again while it fails with an outage, with backoff, until it succeeds
 * or `boundMs` has passed since the outage began (then OutageTooLongError: at once for a call that
 * meets an outage that already lasted its bound, `clock`), or `stopAtMs` comes (then the outage's
 * own error). Any other failure is thrown at once. p-retry keeps the backoff and the time bound.
 */
export async function waitOutOutages<T>(work: () => Promise<T>, asked: OutageWait | (() => OutageWait)): Promise<T> {
  // Asked at each call: an activity's wait ends with its attempt.
  const options = typeof asked === 'function' ? asked() : asked;
  let first: { outage: Outage; began: number; error: unknown };
  const maxDelayMs = options.maxDelayMs ?? 5_000;
  const forgetAfterMs = OUTAGE_FORGOTTEN_AFTER_BACKOFFS * maxDelayMs;
  // The first try outside p-retry: nearly every call succeeds at once, and p-retry's setup per
  // call is not free (src/api/retry.ts measured it so).
  try {
    return await work();
  } catch (error) {
    const outage = outageOf(error);
    if (!outage) throw error;
    const now = Date.now();
    first = { outage, began: options.clock?.began(outage.service, now, forgetAfterMs) ?? now, error };
    options.waiting?.(outage, now - first.began);
  }
  const now = Date.now();
  const boundLeft = options.boundMs - (now - first.began);
  const maxRetryTime = Math.max(0, Math.min(boundLeft, (options.stopAtMs ?? Number.POSITIVE_INFINITY) - now));
  if (maxRetryTime === 0) {
    if (boundLeft <= 0) throw new OutageTooLongError(first.outage, now - first.began);
    throw first.error;
  }
  try {
    const result = await pRetry(work, {
      retries: Number.POSITIVE_INFINITY,
      minTimeout: 250,
      factor: 2,
      maxTimeout: maxDelayMs,
      maxRetryTime,
      shouldRetry: ({ error }) => outageOf(error) !== undefined,
      onFailedAttempt: ({ error }) => {
        const outage = outageOf(error);
        if (!outage) return;
        options.clock?.began(outage.service, Date.now(), forgetAfterMs);
        options.waiting?.(outage, Date.now() - first.began);
      },
    });
    options.clock?.ended(first.outage.service);
    options.back?.(first.outage, Date.now() - first.began);
    return result;
  } catch (error) {
    const outage = outageOf(error);
    if (outage && maxRetryTime >= boundLeft) throw new OutageTooLongError(outage, Date.now() - first.began);
    throw error;
  }
}

/** Store methods that are not retried as a whole: the lake writer's work is the caller's, and closing is no call. */
const NOT_RETRIED = new Set<PropertyKey>(['asLakeWriter', 'close', 'constructor']);

/**
 * The store with every call of it waiting out outages (waitOutOutages), its journals' reads and
 * appends included. A call is made again only when it failed to reach its service; what each
 * does is idempotent but for a journal append whose INSERT committed as its connection dropped,
 * which then counts the call's intent twice: at worst case, never below what was charged.
 * A Proxy rather than a class of its own: the Store interface has some twenty methods, each
 * wrapped the same way.
 */
export function storeRidingOutages<S extends object>(store: S, asked: OutageWait | (() => OutageWait)): S {
  // One clock for every call of the store: the bound is each outage's, however many calls meet it.
  const clock = new OutageClock();
  const wait = () => ({ ...(typeof asked === 'function' ? asked() : asked), clock });
  const journalLog = (log: object) => retrying(log, wait);
  const journals = (inner: object) =>
    new Proxy(inner, {
      get(target, property) {
        const value = Reflect.get(target, property);
        if (typeof value !== 'function') return value;
        // A journal's log, and a run's late records' (call-journal.ts), are made at once: their calls wait out outages.
        if (property === 'journalLog' || property === 'lateLog') return (...args: unknown[]) => journalLog(value.apply(target, args) as object);
        if (property === 'runJournalLogs') return async (...args: unknown[]) => ((await waitOutOutages(() => value.apply(target, args) as Promise<object[]>, wait)) ?? []).map(journalLog);
        return (...args: unknown[]) => waitOutOutages(async () => value.apply(target, args), wait);
      },
    });
  return new Proxy(store, {
    get(target, property) {
      const value = Reflect.get(target, property);
      if (property === 'journals' && typeof value === 'object' && value !== null) return journals(value);
      if (typeof value !== 'function' || NOT_RETRIED.has(property)) return typeof value === 'function' ? value.bind(target) : value;
      return (...args: unknown[]) => waitOutOutages(async () => value.apply(target, args), wait);
    },
  });
}

/** Every method of `inner` waiting out outages. */
function retrying<T extends object>(inner: T, wait: OutageWait | (() => OutageWait)): T {
  return new Proxy(inner, {
    get(target, property) {
      const value = Reflect.get(target, property);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => waitOutOutages(async () => value.apply(target, args), wait);
    },
  });
}
