/**
 * A fence read before the process stopped running is void when the request is written.
 *
 * Whether this process stopped running for a while: frozen (SIGSTOP, a paused VM, a debugger) or
 * held by one long synchronous step. A fence read before such a stop says nothing of the claim
 * after it: another worker may have taken the work over, and its run may even be over, while this
 * one stood still with a request about to be written (issue 39's frozen worker, seen once in CI:
 * one stats call, 3 credits, charged after the run had ended).
 *
 * Written here rather than taken from a library: Node's `perf_hooks.monitorEventLoopDelay` gives
 * a histogram of delays, not when the last long one ended, which is what a fence must compare with.
 */
import type { Dispatcher } from 'undici';

/** How often the watch ticks. */
const TICK_MS = 100;
/** A gap between ticks longer than this is a stall: far above a busy loop's lag, far below the seconds a takeover needs. */
export const STALL_MS = 1_000;

/**
 * How far a test has moved this process's clock on (standStillForTests): zero in the product.
 * A freeze is seen as a gap in the clock between the watch's ticks, so a test can show one
 * without holding its event loop for over a second.
 */
let skipped = 0;
const now = (): number => performance.now() + skipped;

/**
 * For tests: to the watch, the process stood still for `ms` just now, as a frozen or blocked one
 * does (its clock moves on by `ms`, and the next tick sees the gap), without the wait.
 */
export function standStillForTests(ms: number): void {
  skipped += ms;
}

let lastTick = 0;
/** When the last stall the ticks saw ended (the watch's clock, `now`). */
let lastStallEnd = -Infinity;
let ticking: NodeJS.Timeout | undefined;

function tick(): void {
  const at = now();
  if (at - lastTick > STALL_MS) lastStallEnd = at;
  lastTick = at;
}

/** Starts the watch (once per process; its timer does not keep the process alive). */
export function watchLoopStalls(): void {
  if (ticking) return;
  lastTick = now();
  ticking = setInterval(tick, TICK_MS);
  ticking.unref();
}

/**
 * Whether the process stalled at or after `since` (the watch's clock): a stall the ticks saw end
 * since then, or one going on now that they have not seen yet (on waking, I/O callbacks may run
 * before the timers do). A stall seen just before `since` may count too: the caller then reads its
 * fence once more, which is safe.
 */
export function stalledSince(since: number): boolean {
  return now() - lastTick > STALL_MS || lastStallEnd >= since;
}

/** The dispatch option a fenced request carries: when its fence was read (the watch's clock). */
export interface FencedRequest {
  fencedAt?: number;
}

/** A fenced request not written because the process stalled after its fence was read: nothing was sent. */
export class FenceLapsedError extends Error {
  readonly code = 'fence_lapsed';
  constructor() {
    super(`the process stalled for more than ${STALL_MS} ms after the call's fence was read: the call was not sent, its fence is read again`);
  }
}

/**
 * An undici interceptor that checks a fenced request at the last moment: undici calls the
 * handler's onRequestStart in the same synchronous turn as it writes the request to the socket
 * (client-h1.js writeH1), so a request whose process stalled after its fence was read (frozen
 * while waiting for a connection, a freed socket, or the fence's own answer) is aborted unsent
 * there, before a byte leaves, and fails with a FenceLapsedError.
 */
export const fenceAtWrite: Dispatcher.DispatcherComposeInterceptor = (dispatch) => (options, handler) => {
  const fencedAt = (options as FencedRequest).fencedAt;
  // The stall watch runs from fencedRequest, which stamps `fencedAt`.
  if (fencedAt === undefined) return dispatch(options, handler);
  return dispatch(options, {
    onRequestStart(controller, context) {
      handler.onRequestStart?.(controller, context);
      if (stalledSince(fencedAt)) controller.abort(new FenceLapsedError());
    },
    onRequestUpgrade: (controller, statusCode, headers, socket) => handler.onRequestUpgrade?.(controller, statusCode, headers, socket),
    onResponseStart: (controller, statusCode, headers, statusMessage) => handler.onResponseStart?.(controller, statusCode, headers, statusMessage),
    onResponseData: (controller, chunk) => handler.onResponseData?.(controller, chunk),
    onResponseEnd: (controller, trailers) => handler.onResponseEnd?.(controller, trailers),
    onResponseError: (controller, error) => handler.onResponseError?.(controller, error),
  });
};

/** What the fence threw before anything was sent: the call's error, as it was thrown. */
export class Unsent {
  constructor(readonly cause: unknown) {}
}

/**
 * One request, its fence (`beforeSend`) read right before it and checked once more as it is
 * written (`dispatcher` composed with fenceAtWrite): a fence whose read began before the process
 * stalled (frozen with the fence's answer unread, or with the request waiting for a connection) is
 * read again, and the request goes out only under a fence read wholly since. What the fence
 * throws comes out wrapped in Unsent: nothing was sent.
 */
export async function fencedRequest(
  dispatcher: Dispatcher,
  request: Dispatcher.RequestOptions,
  beforeSend: () => void | Promise<void>,
  onLapse: (lapse: FenceLapsedError) => void,
): Promise<Dispatcher.ResponseData> {
  watchLoopStalls();
  for (;;) {
    // Stamped before the read, not after: the read is a round trip (a shared catalog's), and an
    // answer given before a stall but taken after it tells nothing of the claim since (seen in CI
    // with PostgreSQL: the stall watch ticked after the wake, then the old answer came in, and a
    // stamp taken then found no stall after it).
    const fencedAt = now();
    try {
      await beforeSend();
    } catch (error) {
      throw new Unsent(error);
    }
    const fenced: Dispatcher.RequestOptions & FencedRequest = { ...request, fencedAt };
    try {
      return await dispatcher.request(fenced);
    } catch (error) {
      if (!(error instanceof FenceLapsedError)) throw error;
      onLapse(error);
    }
  }
}
