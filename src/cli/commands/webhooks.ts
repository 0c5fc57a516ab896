import { Command, InvalidArgumentError } from 'commander';
import { dataDirFromEnv } from '../../config/environment.js';
import { maskSecret } from '../../logger.js';
import { WEBHOOK_EVENTS, type WebhookEvent } from '../../api-catalog/endpoints.js';
import { readSecrets, writeSecrets } from '../../store/secret-store.js';
import { secretStorePath } from '../../store/layout.js';
import { clientFromEnv, cliLogger } from '../context.js';

function eventList(value: string): WebhookEvent[] {
  const events = value.split(',').map((event) => event.trim());
  for (const event of events) {
    if (!(WEBHOOK_EVENTS as readonly string[]).includes(event)) throw new InvalidArgumentError(`unknown event ${JSON.stringify(event)}; use ${WEBHOOK_EVENTS.join(', ')}`);
  }
  return events as WebhookEvent[];
}

export function webhooksCommand(): Command {
  const command = new Command('webhooks').description('Register, list and delete the API webhook endpoints of your key');
  command
    .command('register')
    .description('Register an HTTPS endpoint; its signing secret is stored for `harvester receiver`')
    .requiredOption('--url <url>', 'HTTPS URL the API delivers to')
    .option('--events <list>', `comma-separated, of ${WEBHOOK_EVENTS.join(', ')}`, eventList, [...WEBHOOK_EVENTS])
    .option('--show-secret', 'also print the signing secret (it is shown by the API only once)')
    .addHelpText('after', '\nExample:\n  $ harvester webhooks register --url https://hooks.example.com/harvester --events job.completed,credits.low')
    .action(async (options: { url: string; events: WebhookEvent[]; showSecret?: boolean }) => {
      const client = clientFromEnv(cliLogger());
      try {
        const created = await client.createWebhook(options.url, options.events);
        const store = secretStorePath(dataDirFromEnv());
        writeSecrets(store, [...readSecrets(store).filter((entry) => entry.webhook_id !== created.webhook_id), { webhook_id: created.webhook_id, url: created.url, secret: created.secret }]);
        process.stdout.write(`${created.webhook_id}\t${created.url}\t${created.events.join(',')}\n`);
        process.stderr.write(`signing secret ${options.showSecret ? created.secret : maskSecret(created.secret)} stored in ${store}\n`);
      } finally {
        await client.close();
      }
    });
  command
    .command('list')
    .description('List registered endpoints (the API never shows secrets again)')
    .option('--json', 'print JSON')
    .action(async (options: { json?: boolean }) => {
      const client = clientFromEnv(cliLogger());
      try {
        const endpoints = await client.listWebhooks();
        if (options.json) process.stdout.write(`${JSON.stringify(endpoints, null, 2)}\n`);
        else for (const endpoint of endpoints) process.stdout.write(`${endpoint.webhook_id}\t${endpoint.url}\t${endpoint.events.join(',')}\t${endpoint.created_at}\n`);
      } finally {
        await client.close();
      }
    });
  command
    .command('delete')
    .description('Delete an endpoint: deliveries in flight finish, no new ones are queued')
    .argument('<webhook_id>')
    .action(async (webhookId: string) => {
      const client = clientFromEnv(cliLogger());
      try {
        await client.deleteWebhook(webhookId);
        const store = secretStorePath(dataDirFromEnv());
        writeSecrets(store, readSecrets(store).filter((entry) => entry.webhook_id !== webhookId));
        process.stderr.write(`deleted ${webhookId}\n`);
      } finally {
        await client.close();
      }
    });
  return command;
}
