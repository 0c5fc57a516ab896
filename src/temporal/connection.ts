import { connect as tcpConnect } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { dataDirFromEnv } from '../config/environment.js';
import { devServerDbFile } from '../store/layout.js';
import type { TemporalSettings } from './settings.js';
import { socketErrorReason } from './socket-reason.js';


/** Temporal did not answer at the configured address: one line that says where, for the CLI to print. */
export class TemporalUnreachableError extends Error {
  override readonly name = 'TemporalUnreachableError';

  constructor(
    readonly address: string,
    cause: unknown,
  ) {
    super(`cannot reach Temporal at ${address} (TEMPORAL_ADDRESS): ${reasonOf(cause)}; ${whatToDo(address)}`, { cause });
  }
}

/** Loopback addresses: where `harvester dev` and `harvester temporal` serve Temporal. */
function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}

/** What the user can do about an unreachable Temporal, in a few words. */
function whatToDo(address: string): string {
  const target = hostAndPort(address);
  if (target && !isLoopback(target.host)) return 'check TEMPORAL_ADDRESS and the network';
  return `start it with \`harvester dev\` (the local stack) or \`harvester temporal\` (Temporal alone; both keep runs, the demo's too, in ${devServerDbFile(dataDirFromEnv())}), or set TEMPORAL_ADDRESS`;
}

/** The host and port of `host:port`, `[v6]:port` or a bare host (port 7233); undefined for anything else (a URI). */
function hostAndPort(address: string): { host: string; port: number } | undefined {
  const match = /^(?:\[([^\]]+)\]|([^:/[\]]+))(?::(\d+))?$/.exec(address);
  if (!match) return undefined;
  return { host: (match[1] ?? match[2])!, port: match[3] ? Number(match[3]) : 7233 };
}

/** Whether something accepts TCP connections at a Temporal address (no gRPC spoken). */
export async function reachable(address: string): Promise<boolean> {
  return probe(address).then(
    () => true,
    () => false,
  );
}

/** How long a TCP connection to Temporal may take before the command says it cannot reach it. */
const PROBE_TIMEOUT_MS = 1_500;

/**
 * A plain TCP connection to Temporal's address, closed at once: refused or unanswered, it fails
 * within PROBE_TIMEOUT_MS, where the gRPC client would keep trying until its own deadline (10 s),
 * which a TLS handshake to a cluster far away may need.
 */
async function probe(address: string): Promise<void> {
  const target = hostAndPort(address);
  if (!target) return;
  await new Promise<void>((resolve, reject) => {
    const socket = tcpConnect({ host: target.host, port: target.port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within ${PROBE_TIMEOUT_MS / 1000} s`));
    }, PROBE_TIMEOUT_MS);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.destroy();
      resolve();
    });
    socket.once('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(new Error(socketErrorReason(error, target.host)));
    });
  });
}

/** The reason in a few words: the worker's native connection wraps it in a page of Rust debug output. */
function reasonOf(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return /message: "([^"]+)"/.exec(message)?.[1] ?? message;
}

export async function connectClient(settings: TemporalSettings): Promise<Client> {
  try {
    await probe(settings.address);
    const connection = await Connection.connect({
      address: settings.address,
      ...(settings.tls ? { tls: settings.tls === true ? {} : settings.tls } : {}),
      ...(settings.apiKey ? { apiKey: settings.apiKey } : {}),
      connectTimeout: '10 seconds',
    });
    return new Client({ connection, namespace: settings.namespace });
  } catch (error) {
    throw new TemporalUnreachableError(settings.address, error);
  }
}

export async function connectWorker(settings: TemporalSettings): Promise<NativeConnection> {
  // Loaded here, not with this module: Temporal's worker package takes about half a second to
  // import, and commands that only talk to Temporal as a client never need it.
  const { NativeConnection } = await import('@temporalio/worker');
  try {
    await probe(settings.address);
    return await NativeConnection.connect({
      address: settings.address,
      ...(settings.tls ? { tls: settings.tls === true ? {} : settings.tls } : {}),
      ...(settings.apiKey ? { apiKey: settings.apiKey } : {}),
    });
  } catch (error) {
    throw new TemporalUnreachableError(settings.address, error);
  }
}
