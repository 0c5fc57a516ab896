import type { TelemetryOptions } from '@temporalio/worker';
import { EnvironmentError } from '../config/environment.js';
import { serveMetrics } from '../metrics/worker-metrics.js';
import { freePort } from './free-port.js';

/** The environment variable that gives a worker's metrics port (`--metrics-port` overrides it). */
export const METRICS_PORT_VARIABLE = 'HARVESTER_METRICS_PORT';

/** The metrics port a worker was given, by its option or the environment; undefined: none served. */
export function metricsPortFrom(option: number | undefined, env: NodeJS.ProcessEnv = process.env): number | undefined {
  if (option !== undefined) return option;
  const value = env[METRICS_PORT_VARIABLE];
  if (value === undefined || value === '') return undefined;
  if (!/^\d+$/.test(value) || Number(value) > 65_535) throw new EnvironmentError(`${METRICS_PORT_VARIABLE} must be a port number from 0 to 65535, got ${JSON.stringify(value)}`);
  return Number(value);
}

/**
 * A worker's Prometheus metrics on one port: the harvest's own (src/metrics/worker-metrics.ts)
 * and the Temporal SDK's (its Rust core's Prometheus exporter, bound to a loopback port of its
 * own and appended to each scrape), so one scrape target has both. `telemetry` goes to
 * Runtime.install, before the worker is made; then `serve` starts the endpoint.
 */
export async function workerMetricsEndpoint(port: number): Promise<{ telemetry: TelemetryOptions; serve(): Promise<{ port: number; close(): Promise<void> }> }> {
  const sdkPort = await freePort();
  const sdkUrl = `http://127.0.0.1:${sdkPort}/metrics`;
  return {
    telemetry: { metrics: { prometheus: { bindAddress: `127.0.0.1:${sdkPort}`, useSecondsForDurations: true } } },
    serve: () =>
      serveMetrics(port, {
        // The SDK's exporter starts with the runtime; a scrape before it answers has the harvest's metrics alone.
        more: () => fetch(sdkUrl).then((response) => (response.ok ? response.text() : ''), () => ''),
      }),
  };
}
