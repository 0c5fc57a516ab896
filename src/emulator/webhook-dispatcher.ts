import { randomBytes } from 'node:crypto';
import type { ClientRequest } from 'node:http';
import { request } from 'node:https';
import { Webhook } from 'standardwebhooks';
import type { WebhookEvent } from '../api-catalog/endpoints.js';

/**
 * Webhook endpoints of each key, and delivery of events to them as Standard Webhooks: signed with
 * the `standardwebhooks` package, retried with backoff after a non-2xx answer or a timeout,
 * disabled by a 410, and never retried once the endpoint is deleted.
 */

export interface WebhookEndpointRecord {
  webhook_id: string;
  url: string;
  events: WebhookEvent[];
  created_at: string;
  apiKey: string;
  secret: string;
  state: 'enabled' | 'disabled' | 'deleted';
}

export interface DeliveryAttempt {
  webhook_id: string;
  msg_id: string;
  type: WebhookEvent;
  attempt: number;
  /** The receiver's HTTP status, or 0 when it could not be reached or timed out. */
  status: number;
  error?: string;
  at: string;
}

export interface DispatcherOptions {
  /** Delays before each retry; its length is the number of retries. */
  retryScheduleMs: readonly number[];
  timeoutMs: number;
  /** Extra trusted CA for HTTPS deliveries; NODE_EXTRA_CA_CERTS works too, for the whole process. */
  ca?: string | Buffer;
}

/** Svix's published schedule, which Standard Webhooks took from: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h. */
export const DEFAULT_RETRY_SCHEDULE_MS = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000];

export class WebhookDispatcher {
  private readonly endpoints = new Map<string, WebhookEndpointRecord>();
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Deliveries on the wire, so close() can abort them. */
  private readonly inFlight = new Set<ClientRequest>();
  private closed = false;
  /** Deliveries not finished: see `pending`. */
  private underWay = 0;
  readonly attempts: DeliveryAttempt[] = [];

  /**
   * Deliveries (one message to one endpoint) not finished yet: an attempt on the wire, or a retry
   * waiting for its time in the schedule. 0 means nothing more is sent until a new event: what a
   * test awaits instead of waiting out the retry schedule.
   */
  get pending(): number {
    return this.underWay;
  }

  constructor(private readonly options: DispatcherOptions) {}

  register(apiKey: string, url: string, events: WebhookEvent[], createdAt: string): WebhookEndpointRecord {
    const endpoint: WebhookEndpointRecord = {
      webhook_id: `wh_${randomBytes(10).toString('hex')}`,
      url,
      events,
      created_at: createdAt,
      apiKey,
      secret: `whsec_${randomBytes(24).toString('base64')}`,
      state: 'enabled',
    };
    this.endpoints.set(endpoint.webhook_id, endpoint);
    return endpoint;
  }

  list(apiKey: string): WebhookEndpointRecord[] {
    return [...this.endpoints.values()].filter((endpoint) => endpoint.apiKey === apiKey && endpoint.state !== 'deleted');
  }

  /** Deletes an endpoint; an attempt already under way finishes, nothing new is queued. */
  delete(apiKey: string, webhookId: string): boolean {
    const endpoint = this.endpoints.get(webhookId);
    if (!endpoint || endpoint.apiKey !== apiKey || endpoint.state === 'deleted') return false;
    endpoint.state = 'deleted';
    return true;
  }

  emit(apiKey: string, type: WebhookEvent, data: Record<string, unknown>, timestamp: string): void {
    if (this.closed) return;
    for (const endpoint of this.list(apiKey)) {
      if (endpoint.state !== 'enabled' || !endpoint.events.includes(type)) continue;
      const msgId = `msg_${randomBytes(12).toString('hex')}`;
      const body = JSON.stringify({ type, timestamp, data });
      this.underWay += 1;
      void this.attempt(endpoint, msgId, type, body, 1);
    }
  }

  /** Stops every delivery for good: pending retries, attempts on the wire, and any later event. */
  close(): void {
    this.closed = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    for (const req of this.inFlight) req.destroy(new Error('the emulator was closed'));
    this.inFlight.clear();
    this.underWay = 0;
  }

  /** Attempt `attempt` of a delivery, and its retry when it is due; the delivery is finished otherwise. */
  private async attempt(endpoint: WebhookEndpointRecord, msgId: string, type: WebhookEvent, body: string, attempt: number): Promise<void> {
    const retryInMs = await this.send(endpoint, msgId, type, body, attempt);
    if (this.closed) return;
    if (retryInMs === undefined) {
      this.underWay -= 1;
      return;
    }
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      void this.attempt(endpoint, msgId, type, body, attempt + 1);
    }, retryInMs);
    this.timers.add(timer);
  }

  /** Sends one attempt and records it; gives the delay before the retry it calls for, if any. */
  private async send(endpoint: WebhookEndpointRecord, msgId: string, type: WebhookEvent, body: string, attempt: number): Promise<number | undefined> {
    if (this.closed || endpoint.state !== 'enabled') return undefined;
    const signedAt = new Date(); // wall clock: receivers compare webhook-timestamp with theirs
    const signature = new Webhook(endpoint.secret).sign(msgId, signedAt, body);
    const outcome = await this.post(endpoint.url, body, {
      'content-type': 'application/json',
      'webhook-id': msgId,
      'webhook-timestamp': String(Math.floor(signedAt.getTime() / 1000)),
      'webhook-signature': signature,
    });
    // An attempt that was on the wire when the emulator closed neither counts nor retries.
    if (this.closed) return undefined;
    this.attempts.push({ webhook_id: endpoint.webhook_id, msg_id: msgId, type, attempt, ...outcome, at: new Date().toISOString() });
    if (outcome.status >= 200 && outcome.status < 300) return undefined;
    if (outcome.status === 410) {
      endpoint.state = 'disabled';
      return undefined;
    }
    return endpoint.state === 'enabled' ? this.options.retryScheduleMs[attempt - 1] : undefined;
  }

  private post(url: string, body: string, headers: Record<string, string>): Promise<{ status: number; error?: string }> {
    return new Promise((resolve) => {
      const req = request(url, { method: 'POST', headers, ca: this.options.ca, timeout: this.options.timeoutMs }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
        res.on('error', (error) => resolve({ status: 0, error: error.message }));
      });
      this.inFlight.add(req);
      req.on('close', () => this.inFlight.delete(req));
      req.on('timeout', () => req.destroy(new Error(`no answer within ${this.options.timeoutMs} ms`)));
      req.on('error', (error) => resolve({ status: 0, error: error.message }));
      req.end(body);
    });
  }
}
