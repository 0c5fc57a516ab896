/** `/v1/webhooks`: registering, listing and deleting a key's webhook endpoints. */
import type { IncomingMessage } from 'node:http';
import { WEBHOOK_EVENTS, type WebhookEvent } from '../api-catalog/endpoints.js';
import { ApiError, invalidParameter } from './api-error.js';
import type { CallContext } from './billing.js';
import { isoSeconds, type EmulatedClock } from './clock.js';
import { readJsonBody, type Reply } from './http-io.js';
import type { WebhookDispatcher } from './webhook-dispatcher.js';

export class WebhookEndpoints {
  constructor(
    private readonly webhooks: WebhookDispatcher,
    private readonly clock: EmulatedClock,
  ) {}

  async create(req: IncomingMessage, context: CallContext): Promise<Reply> {
    const body = await readJsonBody(req);
    const url = body.url;
    if (typeof url !== 'string' || url === '') throw new ApiError(400, 'missing_parameter', 'url is required', 'url');
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw invalidParameter('url', `url is not a valid URL: ${JSON.stringify(url)}`);
    }
    if (parsed.protocol !== 'https:') throw invalidParameter('url', `url must use HTTPS, got ${JSON.stringify(parsed.protocol.replace(':', ''))}`);
    const events = body.events;
    if (!Array.isArray(events) || events.length === 0) throw invalidParameter('events', `events must be a non-empty array of ${WEBHOOK_EVENTS.join(', ')}`);
    for (const event of events) {
      if (!(WEBHOOK_EVENTS as readonly unknown[]).includes(event)) {
        throw invalidParameter('events', `unknown event ${JSON.stringify(event)}; allowed: ${WEBHOOK_EVENTS.join(', ')}`);
      }
    }
    const unique = [...new Set(events as WebhookEvent[])];
    const endpoint = this.webhooks.register(context.account.apiKey, url, unique, isoSeconds(this.clock.now()));
    const { webhook_id, created_at, secret } = endpoint;
    return { status: 201, json: { data: { webhook_id, url, events: unique, secret, created_at }, request_id: context.requestId } };
  }

  list(context: CallContext): Reply {
    const data = this.webhooks.list(context.account.apiKey).map(({ webhook_id, url, events, created_at }) => ({ webhook_id, url, events, created_at }));
    return { status: 200, json: { data, request_id: context.requestId } };
  }

  delete(webhookId: string, context: CallContext): Reply {
    if (!this.webhooks.delete(context.account.apiKey, webhookId)) throw new ApiError(404, 'webhook_not_found', `no webhook endpoint ${webhookId}`);
    return { status: 204 };
  }
}
