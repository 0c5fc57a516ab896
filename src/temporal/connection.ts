import { readFileSync } from 'node:fs';
import { Client, Connection } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';

/**
 * Where Temporal is: the embedded dev server by default (`harvester temporal`, 127.0.0.1:7233),
 * or an existing cluster or Temporal Cloud through TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE, with
 * TEMPORAL_API_KEY, or mTLS through TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY (TEMPORAL_TLS=true for
 * server-verified TLS alone).
 */
export interface TemporalSettings {
  address: string;
  namespace: string;
  apiKey?: string;
  tls?: boolean | { clientCertPair: { crt: Buffer; key: Buffer } };
}

export const DEFAULT_TEMPORAL_ADDRESS = '127.0.0.1:7233';

/** Temporal did not answer at the configured address: one line that says where, for the CLI to print. */
export class TemporalUnreachableError extends Error {
  override readonly name = 'TemporalUnreachableError';

  constructor(
    readonly address: string,
    cause: unknown,
  ) {
    super(`cannot reach Temporal at ${address} (TEMPORAL_ADDRESS): ${reasonOf(cause)}`, { cause });
  }
}

/** The reason in a few words: the worker's native connection wraps it in a page of Rust debug output. */
function reasonOf(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return /message: "([^"]+)"/.exec(message)?.[1] ?? message;
}

export function temporalSettingsFromEnv(env: NodeJS.ProcessEnv = process.env): TemporalSettings {
  const settings: TemporalSettings = { address: env.TEMPORAL_ADDRESS || DEFAULT_TEMPORAL_ADDRESS, namespace: env.TEMPORAL_NAMESPACE || 'default' };
  if (env.TEMPORAL_API_KEY) {
    settings.apiKey = env.TEMPORAL_API_KEY;
    settings.tls = true;
  }
  if (env.TEMPORAL_TLS_CERT || env.TEMPORAL_TLS_KEY) {
    if (!env.TEMPORAL_TLS_CERT || !env.TEMPORAL_TLS_KEY) throw new Error('TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY go together: set both or neither');
    settings.tls = { clientCertPair: { crt: readFileSync(env.TEMPORAL_TLS_CERT), key: readFileSync(env.TEMPORAL_TLS_KEY) } };
  } else if (env.TEMPORAL_TLS === 'true') {
    settings.tls = true;
  }
  return settings;
}

export async function connectClient(settings: TemporalSettings): Promise<Client> {
  try {
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
    return await NativeConnection.connect({
      address: settings.address,
      ...(settings.tls ? { tls: settings.tls === true ? {} : settings.tls } : {}),
      ...(settings.apiKey ? { apiKey: settings.apiKey } : {}),
    });
  } catch (error) {
    throw new TemporalUnreachableError(settings.address, error);
  }
}
