/**
 * The HTTPS webhook receiver. Every delivery is verified as Standard Webhooks with the
 * `standardwebhooks` package (signature, and a timestamp within 5 minutes either way), duplicates
 * of a webhook-id already accepted are acknowledged and dropped, and an event is answered 2xx only
 * once it is durably in the journal. Handlers run after the answer, so the API is never kept waiting.
 *
 * Answers: 202 accepted, 200 duplicate, 400 stale (signed by us, timestamp out of range),
 * 400 invalid_json / invalid_payload (signed by us, body unusable), 401 forged (no signature of ours
 * verifies, whatever the timestamp), 405 not POST, 413 body over 1 MiB, 415 not application/json,
 * 503 not recorded (the sender retries).
 */
import { timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import type { Logger } from '../logger.js';
import { webhookPayloadSchema, type WebhookPayload } from '../api-catalog/resources.js';
import { EventJournal } from '../store/event-journal.js';

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
/** How much of a refused body is read and dropped so its sender can read the refusal. */
const DRAIN_LIMIT_BYTES = 64 << 20;

/** What the server's requests need of the receiver. */
interface Receiving {
  verifiers: () => Webhook[];
  journal: EventJournal;
  logger: Logger | undefined;
  /** Runs the event's handler, after its delivery was answered. */
  handle: (payload: WebhookPayload, id: string) => void;
}

/** A delivery's answer, and the event to handle once it is given. */
interface Judgement {
  status: number;
  reason: string;
  accepted?: { payload: WebhookPayload; id: string };
}

export async function startWebhookReceiver(options: ReceiverOptions): Promise<WebhookReceiver> {
  const secrets = options.secrets;
  if (Array.isArray(secrets) && secrets.length === 0) throw new Error('the webhook receiver needs at least one signing secret (whsec_…)');
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
  const receiving: Receiving = { verifiers: () => (typeof secrets === 'function' ? secrets() : secrets).map((secret) => new Webhook(secret)), journal, logger, handle };
  const server: Server = createServer({ cert: options.cert, key: options.key }, (req, res) => receive(receiving, req, res));

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

/** One request: refused as it arrives when it cannot be a delivery, else read whole and judged. */
function receive(receiving: Receiving, req: IncomingMessage, res: ServerResponse): void {
  const answer = (status: number, reason: string, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify({ status: reason }));
  };
  // A refusal is answered once the body has arrived (and been dropped): answering and closing
  // while the sender still writes resets the connection before a sender that writes all before
  // it reads (Python's http.client, say) can read the answer. A body past DRAIN_LIMIT_BYTES is
  // cut off instead; Node's requestTimeout bounds how long a body may take.
  let refused = false;
  const refuse = (status: number, reason: string) => {
    if (refused) return;
    refused = true;
    let drained = 0;
    req.on('data', (chunk: Buffer) => {
      drained += chunk.length;
      if (drained > DRAIN_LIMIT_BYTES) req.destroy();
    });
    req.on('end', () => answer(status, reason, { connection: 'close' }));
    req.resume();
  };
  if (req.method !== 'POST') return refuse(405, 'method_not_allowed');
  if (!isJsonContentType(req.headers['content-type'])) {
    receiving.logger?.warn({ contentType: req.headers['content-type'] ?? null }, 'webhook delivery rejected: not application/json');
    return refuse(415, 'unsupported_media_type');
  }
  if (Number(req.headers['content-length'] ?? 0) > MAX_BODY_BYTES) return refuse(413, 'body_too_large');
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (chunk: Buffer) => {
    if (refused) return;
    size += chunk.length;
    if (size > MAX_BODY_BYTES) refuse(413, 'body_too_large');
    else chunks.push(chunk);
  });
  req.on('end', () => {
    if (refused) return;
    void judge(receiving, Buffer.concat(chunks).toString('utf8'), req.headers).then(({ status, reason, accepted }) => {
      answer(status, reason);
      if (accepted) receiving.handle(accepted.payload, accepted.id);
    });
  });
}

/** A whole delivery judged: verified, not seen before, a payload, and durably in the journal before it is accepted. */
async function judge(receiving: Receiving, body: string, headers: IncomingHttpHeaders): Promise<Judgement> {
  const { journal, logger } = receiving;
  const id = String(headers['webhook-id'] ?? '');
  const verdict = verify(receiving.verifiers(), body, headers);
  if (verdict !== 'valid') {
    logger?.warn({ webhookId: id, verdict }, 'webhook delivery rejected');
    return { status: verdict === 'stale' ? 400 : 401, reason: verdict };
  }
  if (journal.seenIds.has(id)) {
    logger?.info({ webhookId: id }, 'duplicate webhook delivery dropped');
    return { status: 200, reason: 'duplicate' };
  }
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch (error) {
    logger?.warn({ webhookId: id, signature: 'valid', reason: (error as Error).message }, 'webhook delivery rejected: signature valid, body is not JSON');
    return { status: 400, reason: 'invalid_json' };
  }
  const parsed = webhookPayloadSchema.safeParse(json);
  if (!parsed.success) {
    logger?.warn({ webhookId: id }, 'webhook payload is not {type, timestamp, data}');
    return { status: 400, reason: 'invalid_payload' };
  }
  try {
    await journal.accept(id, parsed.data);
  } catch (error) {
    logger?.error({ webhookId: id, err: error }, 'could not record webhook delivery; the sender will retry');
    return { status: 503, reason: 'not_recorded' };
  }
  return { status: 202, reason: 'accepted', accepted: { payload: parsed.data, id } };
}

type Verdict = 'valid' | 'stale' | 'forged';

/** `application/json`, with parameters such as charset allowed; nothing else is a delivery. */
function isJsonContentType(header: string | undefined): boolean {
  return header !== undefined && /^application\/json\s*(;|$)/i.test(header);
}

/**
 * A signature that does not verify is forged whatever its timestamp; only a delivery signed by one
 * of our secrets can be stale. `Webhook.verify` checks the timestamp before the signature, so its
 * error cannot tell the two apart: when it fails, the signature is checked on its own.
 */
function verify(verifiers: Webhook[], body: string, headers: IncomingHttpHeaders): Verdict {
  const flat = { 'webhook-id': String(headers['webhook-id'] ?? ''), 'webhook-timestamp': String(headers['webhook-timestamp'] ?? ''), 'webhook-signature': String(headers['webhook-signature'] ?? '') };
  for (const verifier of verifiers) {
    try {
      // The body is parsed afterwards, so that a signed body that is not JSON is told apart from a forgery.
      verifier.verify(body, flat, { jsonParse: false });
      return 'valid';
    } catch {
      // Not this secret's delivery, or not now: the next secret may verify it.
    }
  }
  if (!/^\d{1,12}$/.test(flat['webhook-timestamp'])) return 'forged';
  const signedAt = new Date(Number(flat['webhook-timestamp']) * 1000);
  const given = flat['webhook-signature'].split(' ').map((signature) => Buffer.from(signature));
  const signedByUs = verifiers.some((verifier) => {
    const expected = Buffer.from(verifier.sign(flat['webhook-id'], signedAt, body));
    return given.some((signature) => signature.length === expected.length && timingSafeEqual(signature, expected));
  });
  return signedByUs ? 'stale' : 'forged';
}
