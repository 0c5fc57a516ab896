import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { dataDirFromEnv } from '../../config/environment.js';
import { TOOLS_DIR } from '../../config/project-paths.js';
import { createLogger } from '../../logger.js';
import { startWebhookReceiver } from '../../webhooks/receiver.js';
import { readSecrets, secretStorePath } from '../../webhooks/secret-store.js';
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
Signing secrets come from the store that \`harvester webhooks register\` writes
(<data dir>/webhooks/secrets.json) and from SOCIAL_WEBHOOK_SECRETS (comma-separated whsec_… values).

Example:
  $ harvester receiver --port 8443`,
    )
    .action(async (options: { host: string; port: number; cert: string; key: string }) => {
      const logger = createLogger({ name: 'receiver' });
      const dataDir = dataDirFromEnv();
      const secrets = [
        ...readSecrets(secretStorePath(dataDir)).map((entry) => entry.secret),
        ...(process.env.SOCIAL_WEBHOOK_SECRETS ?? '').split(',').map((secret) => secret.trim()).filter(Boolean),
      ];
      if (secrets.length === 0) throw new Error(`no signing secrets: register an endpoint with \`harvester webhooks register\`, or set SOCIAL_WEBHOOK_SECRETS`);
      const receiver = await startWebhookReceiver({
        host: options.host,
        port: options.port,
        cert: readFileSync(options.cert),
        key: readFileSync(options.key),
        secrets,
        journalFile: join(dataDir, 'webhooks', 'journal.jsonl'),
        logger,
        onEvent: (event, webhookId) => {
          process.stdout.write(`${JSON.stringify({ webhook_id: webhookId, ...event })}\n`);
        },
      });
      process.stderr.write(`receiver: listening on https://${options.host}:${receiver.port}/ with ${secrets.length} signing secret(s); Ctrl-C stops it\n`);
      const stop = () => void receiver.close().then(() => process.exit(0));
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
}
