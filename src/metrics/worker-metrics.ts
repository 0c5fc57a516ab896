/**
 * What a worker does, as Prometheus metrics (prom-client): the credits its calls were charged and
 * hold, its calls by outcome, the items it landed, its loads, the landings waiting for one, and
 * the runs it finished by status. One registry per process, filled by the activities (the metered
 * call, the loads, the end of a run) and served by `serveMetrics` when the worker is given a
 * metrics port (HARVESTER_METRICS_PORT or `--metrics-port`). Labels: `harvest` (a harvest's name,
 * a few per deployment), `endpoint` (the API's, a fixed list), `outcome` and `status` (fixed
 * lists): never a run id, so the series stay few however many runs there are.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

export const metricsRegistry = new Registry();

/** Outcomes of a call (each attempt the API answered or may have answered). */
export type CallOutcome =
  /** A billed answer, landed. */
  | 'answered'
  /** Refused by the API with nothing charged (a 404, a 402, a 5xx after the client's retries). */
  | 'refused'
  /** A 429 answer: over the rate limit, charged nothing, tried again after Retry-After. */
  | 'rate_limited'
  /** An attempt whose answer was lost once the request had left (a cut connection, a deadline, an answer the client refused): charged, or perhaps. */
  | 'lost';

export const creditsCharged = new Counter({
  name: 'harvester_credits_charged_total',
  help: "Credits the API charged this worker's calls (its X-Credits-Charged), lost attempts settled at the charge of the attempt that answered",
  labelNames: ['harvest', 'endpoint'] as const,
  registers: [metricsRegistry],
});

export const creditsHeld = new Gauge({
  name: 'harvester_credits_held',
  help: "The worst case of this worker's calls in flight: journaled before each call, released when it answers or fails",
  labelNames: ['harvest'] as const,
  registers: [metricsRegistry],
});

export const creditsRemaining = new Gauge({
  name: 'harvester_credits_remaining',
  help: "The account's balance as the API's last answer to this worker said it (X-Credits-Remaining)",
  registers: [metricsRegistry],
});

export const calls = new Counter({
  name: 'harvester_calls_total',
  help: "This worker's billed calls by outcome: answered, refused (nothing charged), rate_limited (a 429 answer, retried), lost (charged, or perhaps, and no answer landed)",
  labelNames: ['harvest', 'endpoint', 'outcome'] as const,
  registers: [metricsRegistry],
});

export const itemsLanded = new Counter({
  name: 'harvester_items_landed_total',
  help: 'Items of listing pages and job results this worker landed',
  labelNames: ['harvest', 'endpoint'] as const,
  registers: [metricsRegistry],
});

export const loads = new Counter({
  name: 'harvester_loads_total',
  help: "Loads of landings into the warehouse: during runs (every few seconds) and each run's final one, by outcome",
  labelNames: ['kind', 'outcome'] as const,
  registers: [metricsRegistry],
});

export const loadDuration = new Histogram({
  name: 'harvester_load_duration_seconds',
  help: 'How long the loads took',
  labelNames: ['kind'] as const,
  buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
  registers: [metricsRegistry],
});

export const runsFinished = new Counter({
  name: 'harvester_runs_finished_total',
  help: 'Runs this worker finished (their final load), by the harvest and the status they ended with',
  labelNames: ['harvest', 'status'] as const,
  registers: [metricsRegistry],
});

/**
 * The landings this worker wrote that no load of its own has covered yet, with when each was
 * written: a load that completes covers every landing written before it began (it lists them
 * first). Per worker: on a shared store another worker's load may have loaded them already.
 */
class LandingsWaiting {
  /** Times (ms) the waiting landings were written, oldest first. */
  #writtenAt: number[] = [];

  landed(at = Date.now()): void {
    this.#writtenAt.push(at);
  }

  /** A load that began at `startedAt` completed: what was written before it is loaded. */
  loaded(startedAt: number): void {
    this.#writtenAt = this.#writtenAt.filter((at) => at >= startedAt);
  }

  count(): number {
    return this.#writtenAt.length;
  }

  oldestAgeSeconds(now = Date.now()): number {
    return this.#writtenAt.length === 0 ? 0 : (now - this.#writtenAt[0]!) / 1000;
  }
}

export const landingsWaiting = new LandingsWaiting();

new Gauge({
  name: 'harvester_landings_waiting',
  help: 'Landings (answers) this worker wrote that no load of its own has loaded yet',
  registers: [metricsRegistry],
  collect() {
    this.set(landingsWaiting.count());
  },
});

new Gauge({
  name: 'harvester_landings_waiting_oldest_seconds',
  help: 'How long the oldest landing this worker wrote has waited for a load (0 when none waits)',
  registers: [metricsRegistry],
  collect() {
    this.set(landingsWaiting.oldestAgeSeconds());
  },
});

/**
 * A load begun now: say how it ended, and it is counted by kind and outcome, its duration
 * observed, and, once it succeeded, the landings written before it began marked loaded.
 */
export function loadStarted(kind: 'during_run' | 'final'): { succeeded(): void; failed(): void } {
  const startedAt = Date.now();
  const stop = loadDuration.startTimer({ kind });
  return {
    succeeded() {
      stop();
      loads.inc({ kind, outcome: 'ok' });
      landingsWaiting.loaded(startedAt);
    },
    failed() {
      stop();
      loads.inc({ kind, outcome: 'failed' });
    },
  };
}

/**
 * A server of the registry's exposition at /metrics on `port` (0: any free one), on `host`;
 * `more` gives text appended to it (the Temporal SDK's own metrics, in the same format), so one
 * scrape target has both.
 */
export async function serveMetrics(port: number, options: { host?: string; more?: () => Promise<string> } = {}): Promise<{ server: Server; port: number; close(): Promise<void> }> {
  const exposition = async () => {
    const own = await metricsRegistry.metrics();
    const more = options.more ? await options.more() : '';
    return more ? `${own.endsWith('\n') ? own : `${own}\n`}${more}` : own;
  };
  const server = createServer((request, response) => {
    if (request.method !== 'GET' || (request.url ?? '/').split('?')[0] !== '/metrics') {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('metrics are at /metrics\n');
      return;
    }
    exposition().then(
      (text) => response.writeHead(200, { 'content-type': metricsRegistry.contentType }).end(text),
      (error: unknown) => response.writeHead(500, { 'content-type': 'text/plain' }).end(`${String(error)}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, options.host ?? '0.0.0.0', () => {
      server.off('error', reject);
      resolve();
    });
  });
  // Serving metrics is no reason for a process to stay up.
  server.unref();
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
