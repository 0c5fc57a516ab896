/**
 * Riding through outages of the shared store's services (src/store/outage.ts) in activities:
 * - every store call an activity makes waits out an outage inside the attempt, heartbeating as
 *   usual (the long activities' heartbeats run on timers), and the worker's log and the run's
 *   live progress say what is waited for;
 * - an attempt whose own timeout comes first fails with a retryable `StoreOutage`, and Temporal
 *   tries it again (with unlimited attempts: workflows/run-context.ts) until the outage has lasted
 *   the bound since the activity was scheduled; then it fails for good (`OutageTooLong`);
 * - any other retryable failure is tried again until MAX_ATTEMPTS attempts in a row have failed
 *   without progress: a long work (a target's listing) whose attempts each land pages before a
 *   failure (a call held past its deadline, made again by the next attempt) goes on, and one that
 *   fails where it stands stops after MAX_ATTEMPTS, as before the retry policy's attempts became
 *   unlimited. (Counted over the activity's life, a 450-item listing whose every 50th call was held
 *   reached its fourth attempt in most runs, and failed its target at the fifth in one.)
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { ACTIVITY_RETRY_PACE } from '../src/harvest/failures.js';
import type { Logger } from '../src/logger.js';
import { outageOf, OutageTooLongError, type Outage, type OutageWait } from '../src/store/outage.js';

/** Attempts in a row, since the last that made progress, of an activity that fails with anything but an outage. */
export const MAX_ATTEMPTS = 5;

/** An attempt's wait ends this long before its own timeout, so its failure reaches Temporal as itself. */
const ATTEMPT_MARGIN_MS = 5_000;

/** How often a long wait is said again in the log. */
const SAID_AGAIN_EVERY_MS = 30_000;

/** The outage this worker is waiting out now, if any: its heartbeats say so (LiveWork.waiting). */
let current: { outage: Outage; since: number; saidAt: number } | undefined;

/** What this worker is waiting for, in words, for the run's live progress; undefined when nothing. */
export function waitingFor(): string | undefined {
  if (!current) return undefined;
  return `the ${current.outage.service} does not answer (for ${Math.round((Date.now() - current.since) / 1_000)} s): waiting for it`;
}

/**
 * How a store call waits out an outage, asked at each call: up to `boundMs`, and inside an
 * activity, no later than a little before its attempt times out.
 */
export function outageWait(boundMs: number, logger?: Logger): () => OutageWait {
  return () => {
    let stopAtMs: number | undefined;
    try {
      const { info } = Context.current();
      if (info.startToCloseTimeoutMs > 0) stopAtMs = info.currentAttemptScheduledTimestampMs + info.startToCloseTimeoutMs - ATTEMPT_MARGIN_MS;
    } catch {
      // Not in an activity (a CLI command's store): the bound alone.
    }
    return {
      boundMs,
      ...(stopAtMs !== undefined ? { stopAtMs } : {}),
      waiting: (outage) => {
        const now = Date.now();
        if (!current) {
          current = { outage, since: now, saidAt: now };
          logger?.warn({ service: outage.service, message: outage.message, waitsUpToSeconds: Math.round(boundMs / 1_000) }, `the ${outage.service} does not answer: waiting for it`);
        } else if (now - current.saidAt >= SAID_AGAIN_EVERY_MS) {
          current.saidAt = now;
          logger?.warn({ service: outage.service, message: outage.message, waitedSeconds: Math.round((now - current.since) / 1_000) }, `the ${outage.service} still does not answer: waiting for it`);
        }
      },
      back: (outage, waitedMs) => {
        if (current) logger?.info({ service: outage.service, waitedSeconds: Math.round((Date.now() - current.since) / 1_000) }, `the ${outage.service} answers again`);
        else logger?.info({ service: outage.service, waitedSeconds: Math.round(waitedMs / 1_000) }, `the ${outage.service} answers again`);
        current = undefined;
      },
    };
  };
}

/**
 * Each activity's failure as Temporal should retry it: an outage again and again within its
 * bound, anything retryable up to MAX_ATTEMPTS attempts in a row without progress, anything permanent never.
 */
export function boundedRetries<T extends Record<string, (...args: never[]) => Promise<unknown>>>(activities: T, boundMs: number, logger?: Logger): T {
  const bounded: Record<string, (...args: never[]) => Promise<unknown>> = {};
  for (const [name, activity] of Object.entries(activities)) {
    bounded[name] = async (...args: never[]) => {
      try {
        return await activity(...args);
      } catch (error) {
        throw retriedAsItShouldBe(error, boundMs, name, logger);
      }
    };
  }
  return bounded as T;
}

const PROGRESS_ATTEMPT = Symbol('attempt of last progress');

/**
 * Marks a work's failure with the latest attempt that made a point durable (its checkpoint's,
 * activities/checkpoint-heartbeat.ts): the attempts that failed since are the ones counted. Read
 * when the retry is decided, not when the work threw: the work's frame still makes what it reached
 * durable on its way out (work-frame.ts), and that point is this attempt's progress too.
 */
export function withProgressAttempt<E>(error: E, attempt: () => number): E {
  if (error !== null && typeof error === 'object') Object.defineProperty(error, PROGRESS_ATTEMPT, { get: attempt, enumerable: false, configurable: true });
  return error;
}

/** The latest attempt that made progress: the failure's own mark, else the last heartbeat's, else none (0). */
function attemptOfLastProgress(error: unknown, heartbeatDetails: unknown): number {
  const marked = (error as { [PROGRESS_ATTEMPT]?: unknown } | null)?.[PROGRESS_ATTEMPT];
  if (typeof marked === 'number') return marked;
  const beat = (heartbeatDetails as { progressAttempt?: unknown } | null | undefined)?.progressAttempt;
  return typeof beat === 'number' ? beat : 0;
}

/**
 * The failure as an ApplicationFailure Temporal retries, or not, as told: its type, message, details
 * and cause kept, and, when given, the delay before its next attempt.
 */
function asApplicationFailure(error: unknown, retry: { nonRetryable: boolean; nextRetryDelay?: number }): ApplicationFailure {
  if (error instanceof ApplicationFailure) {
    return ApplicationFailure.create({ type: error.type ?? undefined, message: error.message, details: error.details ? [...error.details] : [], cause: error.cause, ...retry });
  }
  const failure = error instanceof Error ? error : new Error(String(error));
  return ApplicationFailure.create({ type: failure.name, message: failure.message, cause: failure, ...retry });
}

/**
 * The delay before the next attempt of a work that failed `withoutProgress` attempts in a row since
 * one made progress: the retry policy's pace, restarted there. Temporal's own grows with every
 * attempt of the activity's life, so a listing that moves on between failures would wait up to 30 s after each.
 */
function delayAfterProgress(withoutProgress: number): number {
  const { firstMs, growth, capMs } = ACTIVITY_RETRY_PACE;
  return Math.min(capMs, firstMs * growth ** Math.max(0, withoutProgress - 1));
}

const WORK_PROGRESS = Symbol('work progress');

/**
 * Marks a work's failure with the durable progress it reached (a listing's position, pages and
 * items): if the failure is final, the workflow is given it in the failure's details, so the run
 * keeps what the work landed rather than showing its target as not started.
 */
export function withWorkProgress<E>(error: E, progress: object): E {
  if (error !== null && typeof error === 'object') Object.defineProperty(error, WORK_PROGRESS, { value: progress, enumerable: false, configurable: true });
  return error;
}

/** A final failure, with the durable progress of its work among its details when there is some. */
function finalFailure(error: unknown, failure: ApplicationFailure, info: { heartbeatDetails?: unknown }): ApplicationFailure {
  // This attempt's own progress, or else the last one heartbeated by an earlier attempt.
  const progress = (error as { [WORK_PROGRESS]?: object } | null)?.[WORK_PROGRESS] ?? info.heartbeatDetails;
  if (progress === undefined || progress === null || typeof progress !== 'object' || !('position' in progress)) return failure;
  const { position, pagesLanded, itemsLanded } = progress as { position: unknown; pagesLanded: unknown; itemsLanded: unknown };
  return ApplicationFailure.create({
    type: failure.type ?? undefined,
    message: failure.message,
    nonRetryable: true,
    details: [...(failure.details ?? []), { workProgress: { position, pagesLanded, itemsLanded } }],
    ...(failure.cause ? { cause: failure.cause } : {}),
  });
}

function retriedAsItShouldBe(error: unknown, boundMs: number, activity: string, logger?: Logger): unknown {
  const { info } = Context.current();
  const decided = retryDecision(error, boundMs, activity, info, logger);
  return decided instanceof ApplicationFailure && decided.nonRetryable ? finalFailure(error, decided, info) : decided;
}

function retryDecision(error: unknown, boundMs: number, activity: string, info: ReturnType<typeof Context.current>['info'], logger?: Logger): unknown {
  if (error instanceof OutageTooLongError) return ApplicationFailure.create({ type: 'OutageTooLong', message: error.message, nonRetryable: true });
  const outage = outageOf(error);
  if (outage) {
    const waitedMs = Date.now() - info.scheduledTimestampMs;
    if (waitedMs >= boundMs) {
      return ApplicationFailure.create({ type: 'OutageTooLong', message: new OutageTooLongError(outage, waitedMs).message, nonRetryable: true });
    }
    logger?.warn({ activity, attempt: info.attempt, service: outage.service, message: outage.message }, `the ${outage.service} does not answer: the activity is tried again`);
    return ApplicationFailure.create({ type: 'StoreOutage', message: `the ${outage.service} does not answer: ${outage.message}`, nonRetryable: false });
  }
  if (error instanceof ApplicationFailure && error.nonRetryable) return error;
  const lastProgress = attemptOfLastProgress(error, info.heartbeatDetails);
  const withoutProgress = info.attempt - lastProgress;
  if (withoutProgress < MAX_ATTEMPTS) return lastProgress === 0 ? error : asApplicationFailure(error, { nonRetryable: false, nextRetryDelay: delayAfterProgress(withoutProgress) });
  // The last attempt: the failure as it was, not to be tried again.
  return asApplicationFailure(error, { nonRetryable: true });
}
