/**
 * Webhook endpoints of the emulator and their deliveries, over real HTTP and real HTTPS: the
 * /v1/webhooks API, Standard Webhooks signatures, retries with backoff, 410 and DELETE, the
 * credits.low and plan.changed events, and certificate verification on delivery.
 */
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { q, startTestEmulator, waitFor, type TestEmulator } from '../support/emulator.js';
import { devCa, startHttpsReceiver, type TestReceiver } from '../support/https-receiver.js';

interface CreatedWebhook {
  webhook_id: string;
  url: string;
  events: string[];
  secret: string;
  created_at: string;
}

interface ListedWebhook {
  webhook_id: string;
  url: string;
  events: string[];
  created_at: string;
}

interface Envelope<T> {
  data: T;
  request_id: string;
}

interface ErrorBody {
  error: { code: string; message: string; param?: string };
  request_id: string;
}

interface Attempt {
  webhook_id: string;
  msg_id: string;
  type: string;
  attempt: number;
  status: number;
  error?: string;
  at: string;
}

const ISO_SECONDS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;
const SCHEDULE = [50, 100, 200] as const;
/** Comfortably longer than the whole retry schedule. */
const PAST_SCHEDULE_MS = SCHEDULE.reduce((sum, delay) => sum + delay, 0) + 350;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let keySequence = 0;

async function newKey(emulator: TestEmulator, credits = 10_000): Promise<string> {
  const apiKey = `sk_live_webhooks_${process.pid}_${++keySequence}`;
  const created = await emulator.admin('keys', { api_key: apiKey, credits });
  expect(created.status).toBe(201);
  return apiKey;
}

async function register(emulator: TestEmulator, apiKey: string, url: string, events: string[]): Promise<CreatedWebhook> {
  const created = await emulator.call<Envelope<CreatedWebhook>>('/webhooks', { apiKey, body: { url, events } });
  expect(created.status).toBe(201);
  return created.json.data;
}

async function attemptsOf(emulator: TestEmulator, webhookId: string): Promise<Attempt[]> {
  const answer = await emulator.admin<{ data: Attempt[] }>('deliveries');
  expect(answer.status).toBe(200);
  return answer.json.data.filter((attempt) => attempt.webhook_id === webhookId);
}

/**
 * Waits until `emulator` has no delivery under way (none on the wire, no retry waiting for its
 * time): from then on nothing reaches a receiver until a new event, so what the receivers hold is
 * final. The event itself, rather than a wait past the retry schedule.
 */
async function deliveriesSettled(emulator: TestEmulator): Promise<void> {
  await waitFor(async () => ((await emulator.admin<{ pending: number }>('deliveries')).json.pending === 0 ? true : undefined), 5_000, 'no delivery under way');
}

async function changePlan(emulator: TestEmulator, apiKey: string, plan: string, credits: number): Promise<void> {
  const answer = await emulator.admin<{ data: { api_key: string; plan: string; credits: number } }>('plan', { api_key: apiKey, plan, credits });
  expect(answer.status).toBe(200);
  expect(answer.json.data).toEqual({ api_key: apiKey, plan, credits });
}

describe('the /v1/webhooks API', () => {
  let emulator: TestEmulator;

  beforeAll(async () => {
    emulator = await startTestEmulator({ jobStepMs: 20, webhookCa: devCa(), webhookRetryScheduleMs: SCHEDULE });
  });

  afterAll(async () => {
    await emulator?.close();
  });

  it('creates an endpoint with 201 and a whsec_ secret', async () => {
    const apiKey = await newKey(emulator);
    const url = 'https://hooks.example.com/social?x=1';
    const created = await emulator.call<Envelope<CreatedWebhook>>('/webhooks', {
      apiKey,
      body: { url, events: ['job.completed', 'credits.low', 'job.completed'] },
    });
    expect(created.status).toBe(201);
    expect(created.headers['content-type']).toMatch(/^application\/json/);
    const data = created.json.data;
    expect(Object.keys(data).sort()).toEqual(['created_at', 'events', 'secret', 'url', 'webhook_id']);
    expect(data.webhook_id).toMatch(/^wh_[A-Za-z0-9]+$/);
    expect(data.url).toBe(url);
    expect(data.events).toEqual(['job.completed', 'credits.low']);
    expect(data.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(data.created_at).toMatch(ISO_SECONDS);
    expect(Math.abs(Date.parse(data.created_at) - Date.now())).toBeLessThan(5_000);
    expect(created.json.request_id).toMatch(/^req_/);
    // Managing webhooks is free.
    expect(created.headers['x-credits-charged']).toBe('0');

    const second = await register(emulator, apiKey, url, ['plan.changed']);
    expect(second.webhook_id).not.toBe(data.webhook_id);
    expect(second.secret).not.toBe(data.secret);
  });

  it('rejects a non-HTTPS url, missing or unknown events, and a non-JSON body', async () => {
    const apiKey = await newKey(emulator);
    const cases: [string, unknown, number, string, string | undefined][] = [
      ['http url', { url: 'http://hooks.example.com/x', events: ['job.completed'] }, 400, 'invalid_parameter', 'url'],
      ['not a url', { url: 'hooks', events: ['job.completed'] }, 400, 'invalid_parameter', 'url'],
      ['no url', { events: ['job.completed'] }, 400, 'missing_parameter', 'url'],
      ['unknown event', { url: 'https://hooks.example.com/x', events: ['job.completed', 'job.started'] }, 400, 'invalid_parameter', 'events'],
      ['empty events', { url: 'https://hooks.example.com/x', events: [] }, 400, 'invalid_parameter', 'events'],
      ['events not an array', { url: 'https://hooks.example.com/x', events: 'job.completed' }, 400, 'invalid_parameter', 'events'],
      ['no events', { url: 'https://hooks.example.com/x' }, 400, 'invalid_parameter', 'events'],
    ];
    for (const [what, body, status, code, param] of cases) {
      const answer = await emulator.call<ErrorBody>('/webhooks', { apiKey, body });
      expect(answer.status, what).toBe(status);
      expect(answer.json.error.code, what).toBe(code);
      expect(answer.json.error.param, what).toBe(param);
    }

    const textBody = await emulator.call<ErrorBody>('/webhooks', {
      apiKey,
      body: JSON.stringify({ url: 'https://hooks.example.com/x', events: ['job.completed'] }),
      headers: { 'content-type': 'text/plain' },
    });
    expect(textBody.status).toBe(415);
    expect(textBody.json.error.code).toBe('unsupported_media_type');

    const list = await emulator.call<Envelope<ListedWebhook[]>>('/webhooks', { apiKey });
    expect(list.json.data).toEqual([]);
  });

  it("lists a key's endpoints without secrets, and deletes with 204 and an empty body", async () => {
    const apiKey = await newKey(emulator);
    const stranger = await newKey(emulator);
    const a = await register(emulator, apiKey, 'https://hooks.example.com/a', ['job.completed']);
    const b = await register(emulator, apiKey, 'https://hooks.example.com/b', ['credits.low', 'plan.changed']);
    const theirs = await register(emulator, stranger, 'https://hooks.example.com/c', ['plan.changed']);

    const list = await emulator.call<Envelope<ListedWebhook[]>>('/webhooks', { apiKey });
    expect(list.status).toBe(200);
    expect(list.json.data).toEqual([
      { webhook_id: a.webhook_id, url: a.url, events: a.events, created_at: a.created_at },
      { webhook_id: b.webhook_id, url: b.url, events: b.events, created_at: b.created_at },
    ]);
    for (const secret of [a.secret, b.secret, theirs.secret]) expect(list.text).not.toContain(secret.slice('whsec_'.length));
    expect(list.text).not.toContain('secret');

    // Another key can neither see nor delete these endpoints.
    const strangerList = await emulator.call<Envelope<ListedWebhook[]>>('/webhooks', { apiKey: stranger });
    expect(strangerList.json.data.map((hook) => hook.webhook_id)).toEqual([theirs.webhook_id]);
    const foreignDelete = await emulator.call<ErrorBody>(`/webhooks/${a.webhook_id}`, { apiKey: stranger, method: 'DELETE' });
    expect(foreignDelete.status).toBe(404);
    expect(foreignDelete.json.error.code).toBe('webhook_not_found');

    const deleted = await emulator.call(`/webhooks/${a.webhook_id}`, { apiKey, method: 'DELETE' });
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe('');
    expect(deleted.headers['content-length'] ?? '0').toBe('0');

    const after = await emulator.call<Envelope<ListedWebhook[]>>('/webhooks', { apiKey });
    expect(after.json.data.map((hook) => hook.webhook_id)).toEqual([b.webhook_id]);

    for (const id of [a.webhook_id, 'wh_00000000000000000000', 'nope']) {
      const missing = await emulator.call<ErrorBody>(`/webhooks/${q(id)}`, { apiKey, method: 'DELETE' });
      expect(missing.status, id).toBe(404);
      expect(missing.json.error.code, id).toBe('webhook_not_found');
    }
    expect((await emulator.call('/webhooks', { apiKey: null })).status).toBe(401);
  });
});

describe('webhook deliveries', () => {
  let emulator: TestEmulator;
  const receivers: TestReceiver[] = [];
  const extraEmulators: TestEmulator[] = [];

  async function receiver(): Promise<TestReceiver> {
    const started = await startHttpsReceiver();
    receivers.push(started);
    return started;
  }

  /** A fresh key with one endpoint at a fresh receiver that verifies with its secret. */
  async function subscribed(events: string[], credits = 10_000) {
    const target = await receiver();
    const apiKey = await newKey(emulator, credits);
    const hook = await register(emulator, apiKey, target.url, events);
    target.secret = hook.secret;
    return { receiver: target, apiKey, hook };
  }

  beforeAll(async () => {
    emulator = await startTestEmulator({ jobStepMs: 20, webhookCa: devCa(), webhookRetryScheduleMs: SCHEDULE });
  });

  afterEach(async () => {
    await Promise.all(extraEmulators.splice(0).map((extra) => extra.close()));
    await Promise.all(receivers.splice(0).map((target) => target.close()));
  });

  afterAll(async () => {
    await emulator?.close();
  });

  it('delivers plan.changed as a signed Standard Webhooks message', async () => {
    const { receiver: target, apiKey, hook } = await subscribed(['plan.changed']);
    await changePlan(emulator, apiKey, 'pro', 50_000);

    const delivery = await waitFor(() => target.deliveries[0], 5_000, 'the plan.changed delivery');
    expect(delivery.verified).toBe(true);
    expect(delivery.headers['content-type']).toMatch(/^application\/json/);
    expect(delivery.headers['webhook-id']).toMatch(/^msg_[A-Za-z0-9]+$/);
    expect(delivery.headers['webhook-timestamp']).toMatch(/^\d+$/);
    expect(Math.abs(Number(delivery.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(5);
    expect(delivery.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);

    const payload = JSON.parse(delivery.body) as { type: string; timestamp: string; data: Record<string, unknown> };
    expect(Object.keys(payload).sort()).toEqual(['data', 'timestamp', 'type']);
    expect(payload.type).toBe('plan.changed');
    expect(payload.timestamp).toMatch(ISO_SECONDS);
    expect(payload.data).toEqual({ plan: 'pro', credits: 50_000 });
    expect(delivery.payload).toEqual(payload);

    // The signature is really over this message with this endpoint's secret: any other secret,
    // or a changed body, fails verification.
    const headers = delivery.headers;
    expect(() => new Webhook(hook.secret).verify(delivery.body, headers)).not.toThrow();
    const otherSecret = `whsec_${Buffer.alloc(24, 7).toString('base64')}`;
    expect(() => new Webhook(otherSecret).verify(delivery.body, headers)).toThrow();
    expect(() => new Webhook(hook.secret).verify(delivery.body.replace('50000', '50001'), headers)).toThrow();

    const attempts = await attemptsOf(emulator, hook.webhook_id);
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({ webhook_id: hook.webhook_id, msg_id: delivery.headers['webhook-id'], type: 'plan.changed', attempt: 1, status: 200 });
    expect(Number.isNaN(Date.parse(attempts[0]?.at as string))).toBe(false);
  });

  it('signs with the wall clock even when the emulated clock has moved on', async () => {
    const separate = await startTestEmulator({ jobStepMs: 20, webhookCa: devCa(), webhookRetryScheduleMs: SCHEDULE });
    extraEmulators.push(separate);
    const target = await receiver();
    const apiKey = separate.apiKey;
    const created = await separate.call<Envelope<CreatedWebhook>>('/webhooks', { apiKey, body: { url: target.url, events: ['plan.changed'] } });
    target.secret = created.json.data.secret;
    const advanced = await separate.admin('clock', { advance_seconds: 3 * 86_400 });
    expect(advanced.status).toBe(200);

    const planChanged = await separate.admin('plan', { api_key: apiKey, plan: 'later', credits: 10 });
    expect(planChanged.status).toBe(200);
    const delivery = await waitFor(() => target.deliveries[0], 5_000, 'the delivery');
    expect(Math.abs(Number(delivery.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(5);
    expect(delivery.verified).toBe(true);
    // The payload's timestamp is the emulated time of the event.
    expect(Date.parse(delivery.payload?.timestamp as string) - Date.now()).toBeGreaterThan(2 * 86_400_000);
  });

  it('delivers only subscribed events of the same key', async () => {
    const { receiver: target, apiKey } = await subscribed(['credits.low']);
    const other = await subscribed(['plan.changed']);
    await changePlan(emulator, apiKey, 'pro', 20_000);
    // The other key's event reaches the other key's endpoint only.
    await changePlan(emulator, other.apiKey, 'pro', 20_000);
    await waitFor(() => other.receiver.deliveries[0], 5_000, "the other key's delivery");
    await deliveriesSettled(emulator);
    expect(target.deliveries).toEqual([]);
    expect(other.receiver.deliveries).toHaveLength(1);
    expect(other.receiver.deliveries[0]?.payload?.type).toBe('plan.changed');
  });

  it('retries a non-2xx answer with backoff, re-signing the same message id', async () => {
    const { receiver: target, apiKey, hook } = await subscribed(['plan.changed']);
    target.answers = [500, 500];
    await changePlan(emulator, apiKey, 'pro', 1_234);

    await waitFor(() => (target.deliveries.length >= 3 ? true : undefined), 5_000, 'three attempts');
    await deliveriesSettled(emulator);
    expect(target.deliveries).toHaveLength(3);
    const ids = target.deliveries.map((delivery) => delivery.headers['webhook-id']);
    expect(new Set(ids).size).toBe(1);
    expect(ids[0]).toMatch(/^msg_/);
    expect(target.deliveries.every((delivery) => delivery.verified)).toBe(true);
    expect(target.deliveries.at(-1)?.payload).toMatchObject({ type: 'plan.changed', data: { plan: 'pro', credits: 1_234 } });
    expect(new Set(target.deliveries.map((delivery) => delivery.body)).size).toBe(1);

    const attempts = await attemptsOf(emulator, hook.webhook_id);
    expect(attempts.map(({ attempt, status, msg_id, type }) => ({ attempt, status, msg_id, type }))).toEqual([
      { attempt: 1, status: 500, msg_id: ids[0], type: 'plan.changed' },
      { attempt: 2, status: 500, msg_id: ids[0], type: 'plan.changed' },
      { attempt: 3, status: 200, msg_id: ids[0], type: 'plan.changed' },
    ]);
    // Backoff: each retry waits at least its delay in the schedule (less a little timer slack).
    const at = attempts.map((attempt) => Date.parse(attempt.at));
    expect((at[1] as number) - (at[0] as number)).toBeGreaterThanOrEqual(SCHEDULE[0] - 5);
    expect((at[2] as number) - (at[1] as number)).toBeGreaterThanOrEqual(SCHEDULE[1] - 5);
  });

  it('gives up after the last retry of the schedule', async () => {
    const { receiver: target, apiKey, hook } = await subscribed(['plan.changed']);
    target.answers = [503, 503, 503, 503, 503, 503];
    await changePlan(emulator, apiKey, 'pro', 99);

    await waitFor(() => (target.deliveries.length >= SCHEDULE.length + 1 ? true : undefined), 5_000, 'every attempt');
    await deliveriesSettled(emulator);
    expect(target.deliveries).toHaveLength(SCHEDULE.length + 1);
    const attempts = await attemptsOf(emulator, hook.webhook_id);
    expect(attempts.map((attempt) => [attempt.attempt, attempt.status])).toEqual([
      [1, 503],
      [2, 503],
      [3, 503],
      [4, 503],
    ]);
  });

  it('disables the endpoint on a 410: no retries, and later events are not delivered', async () => {
    const { receiver: target, apiKey, hook } = await subscribed(['plan.changed']);
    target.answers = [410];
    await changePlan(emulator, apiKey, 'pro', 100);
    // The emulator has its 410 (and so has disabled the endpoint, in the same step) once it lists
    // the attempt.
    await waitFor(async () => ((await attemptsOf(emulator, hook.webhook_id)).length > 0 ? true : undefined), 5_000, 'the first attempt');
    // A later event, then until no delivery is under way: a retry of the first event (due 50 ms
    // after its 410) and a delivery of the second would both have arrived by then.
    await changePlan(emulator, apiKey, 'pro', 200);
    await deliveriesSettled(emulator);
    expect(target.deliveries).toHaveLength(1);
    const attempts = await attemptsOf(emulator, hook.webhook_id);
    expect(attempts.map((attempt) => [attempt.attempt, attempt.status])).toEqual([[1, 410]]);
  });

  it('does not retry after DELETE, when deleted at once', async () => {
    const { receiver: target, apiKey, hook } = await subscribed(['plan.changed']);
    target.answers = [500, 500, 500];
    await changePlan(emulator, apiKey, 'pro', 100);
    const deleted = await emulator.call(`/webhooks/${hook.webhook_id}`, { apiKey, method: 'DELETE' });
    expect(deleted.status).toBe(204);

    // The first attempt was already on the wire when the endpoint was deleted: it finishes, and
    // its 500 is not retried.
    await waitFor(async () => ((await attemptsOf(emulator, hook.webhook_id)).length === 1 ? true : undefined), 5_000, 'the first attempt');
    await deliveriesSettled(emulator);
    expect(target.deliveries).toHaveLength(1);
    expect((await attemptsOf(emulator, hook.webhook_id)).map((attempt) => [attempt.attempt, attempt.status])).toEqual([[1, 500]]);
  });

  it('does not retry after DELETE, when deleted with a retry already scheduled', async () => {
    const slow = await startTestEmulator({ jobStepMs: 20, webhookCa: devCa(), webhookRetryScheduleMs: [400, 400] });
    extraEmulators.push(slow);
    const target = await receiver();
    const apiKey = slow.apiKey;
    const created = await slow.call<Envelope<CreatedWebhook>>('/webhooks', { apiKey, body: { url: target.url, events: ['plan.changed'] } });
    target.secret = created.json.data.secret;
    const webhookId = created.json.data.webhook_id;
    target.answers = [500, 500];

    expect((await slow.admin('plan', { api_key: apiKey, plan: 'pro', credits: 100 })).status).toBe(200);
    // The first attempt has been answered 500, so the retry timer is set.
    await waitFor(async () => ((await attemptsOf(slow, webhookId)).length === 1 ? true : undefined), 5_000, 'the first attempt');
    const deleted = await slow.call(`/webhooks/${webhookId}`, { apiKey, method: 'DELETE' });
    expect(deleted.status).toBe(204);

    // The retry is still waiting for its time (400 ms), and when it comes it finds the endpoint deleted.
    expect((await slow.admin<{ pending: number }>('deliveries')).json.pending).toBe(1);
    await deliveriesSettled(slow);
    expect(target.deliveries).toHaveLength(1);
    expect((await attemptsOf(slow, webhookId)).map((attempt) => [attempt.attempt, attempt.status])).toEqual([[1, 500]]);
  });

  it('stops delivering once the emulator is closed: no retry after close', async () => {
    const closing = await startTestEmulator({ jobStepMs: 20, webhookCa: devCa(), webhookRetryScheduleMs: SCHEDULE });
    const target = await receiver();
    const apiKey = closing.apiKey;
    const created = await closing.call<Envelope<CreatedWebhook>>('/webhooks', { apiKey, body: { url: target.url, events: ['plan.changed'] } });
    target.secret = created.json.data.secret;
    target.answers = [500, 500, 500, 500];

    expect((await closing.admin('plan', { api_key: apiKey, plan: 'pro', credits: 100 })).status).toBe(200);
    // The first attempt is on the wire now; closing must not let it schedule retries.
    await closing.close();
    await sleep(PAST_SCHEDULE_MS);
    expect(target.deliveries.length).toBeLessThanOrEqual(1);
  });

  it('fires credits.low once, when the balance crosses below 10% of the plan credits', async () => {
    const { receiver: target, apiKey } = await subscribed(['credits.low'], 1_000);
    const handle = (await emulator.catalog()).tiktok.handles[0] as string;
    // A video URL, looked up with the emulator's own key so the test key's balance is untouched.
    const videos = await emulator.call<{ data: { url: string }[] }>(`/tiktok/channel-videos?handle=${q(handle)}&limit=1`);
    const videoUrl = videos.json.data[0]?.url as string;
    expect(videoUrl).toMatch(/^https:\/\//);

    const spend = async () => {
      const answer = await emulator.call(`/tiktok/stats?url=${q(videoUrl)}`, { apiKey });
      expect(answer.status).toBe(200);
      expect(answer.headers['x-credits-charged']).toBe('3');
      return Number(answer.headers['x-credits-remaining']);
    };

    let balance = 1_000;
    while (balance > 100) balance = await spend();
    // Exactly at 10%: not below it yet.
    expect(balance).toBe(100);
    await deliveriesSettled(emulator);
    expect(target.deliveries).toEqual([]);

    balance = await spend();
    expect(balance).toBe(97);
    const delivery = await waitFor(() => target.deliveries[0], 5_000, 'the credits.low delivery');
    expect(delivery.verified).toBe(true);
    expect(delivery.payload?.type).toBe('credits.low');
    expect(delivery.payload?.data).toEqual({ remaining_credits: 97, plan: 'default', plan_credits: 1_000 });

    for (let i = 0; i < 10; i++) balance = await spend();
    expect(balance).toBe(67);
    await deliveriesSettled(emulator);
    expect(target.deliveries).toHaveLength(1);
  });

  it('proves deliveries verify certificates: without the dev CA nothing reaches the receiver', async () => {
    const untrusting = await startTestEmulator({ jobStepMs: 20, webhookRetryScheduleMs: SCHEDULE });
    extraEmulators.push(untrusting);
    const target = await receiver();
    const apiKey = untrusting.apiKey;
    const created = await untrusting.call<Envelope<CreatedWebhook>>('/webhooks', { apiKey, body: { url: target.url, events: ['plan.changed'] } });
    expect(created.status).toBe(201);
    target.secret = created.json.data.secret;
    const webhookId = created.json.data.webhook_id;

    expect((await untrusting.admin('plan', { api_key: apiKey, plan: 'pro', credits: 100 })).status).toBe(200);
    const attempts = await waitFor(
      async () => {
        const all = await attemptsOf(untrusting, webhookId);
        return all.length === SCHEDULE.length + 1 ? all : undefined;
      },
      5_000,
      'every failed attempt',
    );
    for (const attempt of attempts) {
      expect(attempt.status).toBe(0);
      expect(attempt.error).toMatch(/certificate|self.signed|issuer/i);
    }
    expect(target.deliveries).toEqual([]);

    // The same receiver, reached by an emulator that trusts the dev CA, does get the message.
    const { receiver: trusted, apiKey: trustedKey } = await subscribed(['plan.changed']);
    await changePlan(emulator, trustedKey, 'pro', 100);
    expect((await waitFor(() => trusted.deliveries[0], 5_000, 'the trusted delivery')).verified).toBe(true);
  });

  it('lists attempts at GET /_emulator/deliveries', async () => {
    const { receiver: target, apiKey, hook } = await subscribed(['plan.changed']);
    target.answers = [502];
    await changePlan(emulator, apiKey, 'pro', 321);
    const attempts = await waitFor(
      async () => {
        const all = await attemptsOf(emulator, hook.webhook_id);
        return all.length === 2 ? all : undefined;
      },
      5_000,
      'two attempts',
    );
    for (const attempt of attempts) {
      expect(Object.keys(attempt).sort()).toEqual(['at', 'attempt', 'msg_id', 'status', 'type', 'webhook_id']);
      expect(attempt.msg_id).toBe(target.deliveries[0]?.headers['webhook-id']);
    }
    expect(attempts.map((attempt) => [attempt.attempt, attempt.status])).toEqual([
      [1, 502],
      [2, 200],
    ]);
  });
});
