/**
 * The HTTPS webhook receiver. Every delivery is verified as Standard Webhooks with the
 * `standardwebhooks` package (signature, and a timestamp within 5 minutes either way), duplicates
 * of a webhook-id already accepted are acknowledged and dropped, and an event is answered 2xx only
 * once it is durably in the journal. Handlers run after the answer, so the API is never kept waiting.
 */
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import type { Logger } from '../logger.js';
import { webhookPayloadSchema, type WebhookPayload } from '../spec/resources.js';
import { EventJournal } from './event-journal.js';

export type WebhookHandler = (event: WebhookPayload, webhookId: string) => Promise<void> | void;

export interface ReceiverOptions {
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  cert: string | Buffer;
  key: string | Buffer;
  /**
   * Signing secrets (`whsec_…`) of the endpoints that deliver here. A function is asked on each
   * delivery, so an endpoint registered after start (its secret known only then) is verified too.
   */
  secrets: string[] | (() => string[]);
  journalFile: string;
  onEvent: WebhookHandler;
  logger?: Logger;
}

export interface WebhookReceiver {
  /** https://localhost:PORT/ (any path is accepted) */
  url: string;
  port: number;
  close(): Promise<void>;
}

const MAX_BODY_BYTES = 1 << 20;

export async function startWebhookReceiver(options: ReceiverOptions): Promise<WebhookReceiver> {
  const secrets = options.secrets;
  if (Array.isArray(secrets) && secrets.length === 0) throw new Error('the webhook receiver needs at least one signing secret (whsec_…)');
  const verifiers = () => (typeof secrets === 'function' ? secrets() : secrets).map((secret) => new Webhook(secret));
  const journal = await EventJournal.open(options.journalFile);
  const logger = options.logger;
  const pending = new Set<Promise<void>>();

  const handle = (payload: WebhookPayload, id: string) => {
    const run = (async () => {
      try {
        await options.onEvent(payload, id);
        await journal.handled(id);
      } catch (error) {
        // Stays unhandled in the journal, so the next start hands it over again.
        logger?.error({ webhookId: id, type: payload.type, err: error }, 'webhook handler failed');
      }
    })();
    pending.add(run);
    void run.finally(() => pending.delete(run));
  };

  const server: Server = createServer({ cert: options.cert, key: options.key }, (req, res) => {
    const answer = (status: number, reason: string) => {
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ status: reason }));
    };
    if (req.method !== 'POST') return answer(405, 'method_not_allowed');
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) req.destroy();
      else chunks.push(chunk);
    });
    req.on('end', () => {
      void (async () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const id = String(req.headers['webhook-id'] ?? '');
        const verdict = verify(verifiers(), body, req.headers as Record<string, string>);
        if (verdict !== 'valid') {
          logger?.warn({ webhookId: id, verdict }, 'webhook delivery rejected');
          return answer(verdict === 'stale' ? 400 : 401, verdict);
        }
        if (journal.seenIds.has(id)) {
          logger?.info({ webhookId: id }, 'duplicate webhook delivery dropped');
          return answer(200, 'duplicate');
        }
        const parsed = webhookPayloadSchema.safeParse(parseJson(body));
        if (!parsed.success) {
          logger?.warn({ webhookId: id }, 'webhook payload is not {type, timestamp, data}');
          return answer(400, 'invalid_payload');
        }
        try {
          await journal.accept(id, parsed.data);
        } catch (error) {
          logger?.error({ webhookId: id, err: error }, 'could not record webhook delivery; the sender will retry');
          return answer(503, 'not_recorded');
        }
        answer(202, 'accepted');
        handle(parsed.data, id);
      })();
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  // Events accepted before a crash but never handled are handed over again now.
  for (const [id, payload] of journal.unhandled) handle(payload, id);
  return {
    url: `https://localhost:${port}/`,
    port,
    async close() {
      await new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      });
      await Promise.all(pending);
      await journal.close();
    },
  };
}

type Verdict = 'valid' | 'stale' | 'forged';

function verify(verifiers: Webhook[], body: string, headers: Record<string, string>): Verdict {
  let verdict: Verdict = 'forged';
  for (const verifier of verifiers) {
    try {
      verifier.verify(body, headers);
      return 'valid';
    } catch (error) {
      if (error instanceof WebhookVerificationError && /timestamp/i.test(error.message)) verdict = 'stale';
    }
  }
  return verdict;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
