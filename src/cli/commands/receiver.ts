import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { dataDirFromEnv } from '../../config/environment.js';
import { TOOLS_DIR } from '../../project-paths.js';
import { createLogger } from '../../logger.js';
import { startWebhookReceiver } from '../../webhooks/receiver.js';
import { temporalWebhookHandler } from '../../webhooks/temporal-bridge.js';
import { storeFromEnvironment } from '../../store/store-from-environment.js';
import { connectClient } from '../../temporal/connection.js';
import { temporalSettingsFromEnv } from '../../temporal/settings.js';
import { readSecrets } from '../../store/secret-store.js';
import { secretStorePath, webhookJournalFile } from '../../store/layout.js';
import { wholeNumber } from '../options.js';

export function receiverCommand(): Command {
  return new Command('receiver')
    .description('Run the HTTPS webhook receiver: verifies every delivery and prints accepted events as NDJSON')
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--port <port>', 'port to listen on', wholeNumber(0, 65_535), 8443)
    .option('--cert <file>', 'TLS certificate (PEM); default: the development certificate from setup', join(TOOLS_DIR, 'certs', 'localhost.pem'))
    .option('--key <file>', 'TLS private key (PEM)', join(TOOLS_DIR, 'certs', 'localhost-key.pem'))
    .addHelpText(
      'after',
      `
Accepted events are printed as NDJSON and, unless --no-temporal, act on Temporal: job.completed
signals the run waiting on that job, credits.low pauses the harvest schedules and stops new runs,
plan.changed resumes them. Signing secrets come from the store that \`harvester webhooks register\` writes
(<data dir>/webhooks/secrets.json) and from SOCIAL_WEBHOOK_SECRETS (comma-separated whsec_… values).

Example:
  $ harvester receiver --port 8443`,
    )
    .option('--no-temporal', 'only print events; do not signal runs or pause schedules through Temporal')
    .action(async (options: { host: string; port: number; cert: string; key: string; temporal: boolean }) => {
      const logger = createLogger({ name: 'receiver' });
      const dataDir = dataDirFromEnv();
      const secrets = [
        ...readSecrets(secretStorePath(dataDir)).map((entry) => entry.secret),
        ...(process.env.SOCIAL_WEBHOOK_SECRETS ?? '').split(',').map((secret) => secret.trim()).filter(Boolean),
      ];
      if (secrets.length === 0) throw new Error(`no signing secrets: register an endpoint with \`harvester webhooks register\`, or set SOCIAL_WEBHOOK_SECRETS`);
      // Events also act on Temporal (job.completed wakes its run, credits.low pauses schedules…).
      const temporal = options.temporal ? await connectClient(temporalSettingsFromEnv()) : undefined;
      const store = temporal ? await storeFromEnvironment(dataDir) : undefined;
      const actOnTemporal = temporal && store ? temporalWebhookHandler(temporal, store, logger) : undefined;
      const receiver = await startWebhookReceiver({
        host: options.host,
        port: options.port,
        cert: readFileSync(options.cert),
        key: readFileSync(options.key),
        secrets,
        journalFile: webhookJournalFile(dataDir),
        logger,
        onEvent: async (event, webhookId) => {
          process.stdout.write(`${JSON.stringify({ webhook_id: webhookId, ...event })}\n`);
          await actOnTemporal?.(event);
        },
      });
      // Listened to before the line that says it listens: a script may stop it the moment it reads it.
      const stop = () => void receiver.close().then(async () => {
        await temporal?.connection.close();
        await store?.close();
        process.exit(0);
      });
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
      process.stderr.write(`receiver: listening on https://${options.host}:${receiver.port}/ with ${secrets.length} signing secret(s); Ctrl-C stops it\n`);
    });
}
