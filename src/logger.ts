import { pino, type DestinationStream, type Logger } from 'pino';

/**
 * The project's logger. Secrets never reach a log line: API keys, webhook secrets, signatures and
 * authorization headers are redacted wherever they appear in a logged object, at any depth we log.
 */
export const REDACTED_PATHS = [
  'apiKey',
  'api_key',
  'secret',
  'secrets',
  'signature',
  'authorization',
  '*.apiKey',
  '*.api_key',
  '*.secret',
  '*.secrets',
  '*.signature',
  '*.authorization',
  'headers.authorization',
  'headers["webhook-signature"]',
  '*.headers.authorization',
  '*.headers["webhook-signature"]',
];

export type { Logger };

export function createLogger(options: { name?: string; level?: string; destination?: DestinationStream } = {}): Logger {
  return pino(
    {
      name: options.name ?? 'harvester',
      level: options.level ?? process.env.LOG_LEVEL ?? 'info',
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    },
    options.destination ?? pino.destination(2),
  );
}

/** Masks a secret for display: its kind prefix and last four characters, as dashboards show keys. */
export function maskSecret(secret: string): string {
  const prefix = /^(sk_live_|whsec_)/.exec(secret)?.[1] ?? '';
  return `${prefix}…${secret.slice(-4)}`;
}
