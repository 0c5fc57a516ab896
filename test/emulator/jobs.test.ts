/**
 * Async jobs of the emulator, over real HTTP: a list request with limit above 50 becomes a job,
 * which is free to create, charged once when it completes (items delivered × price), and read
 * back through signed, free results pages.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadPriceTable } from '../../src/config/prices.js';
import { q, startTestEmulator, waitFor, type HttpResult, type TestEmulator } from '../support/emulator.js';
import { devCa, startHttpsReceiver, type TestReceiver } from '../support/https-receiver.js';
import type { JobRecord } from '../../src/emulator/jobs.js';


interface PageMeta {
  count: number;
  limit: number;
  item?: string;
  cursor?: string;
  has_more: boolean;
}

interface Item {
  id: string;
  url: string;
}

interface Envelope<T> {
  data: T;
  meta?: PageMeta;
  request_id: string;
}

interface ErrorBody {
  error: { code: string; message: string; param?: string; required_credits?: number; remaining_credits?: number };
  request_id: string;
}

const ISO_SECONDS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;
const PRICES = loadPriceTable();
const VIDEO_PRICE = PRICES['tiktok/channel-videos'];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let keySequence = 0;

/** A fresh key with its own balance and ledger, so tests never see each other's charges. */
async function newKey(emulator: TestEmulator, credits: number): Promise<string> {
  const apiKey = `sk_live_jobs_${process.pid}_${++keySequence}`;
  const created = await emulator.admin<Envelope<{ api_key: string; credits: number }>>('keys', { api_key: apiKey, credits });
  expect(created.status).toBe(201);
  expect(created.json.data.credits).toBe(credits);
  return apiKey;
}

function createJob(emulator: TestEmulator, apiKey: string, handle: string, limit: number, extra = ''): Promise<HttpResult<Envelope<JobRecord>>> {
  return emulator.call<Envelope<JobRecord>>(`/tiktok/channel-videos?handle=${q(handle)}&limit=${limit}${extra}`, { apiKey });
}

function getJob(emulator: TestEmulator, apiKey: string, jobId: string): Promise<HttpResult<Envelope<JobRecord>>> {
  return emulator.call<Envelope<JobRecord>>(`/jobs/${jobId}`, { apiKey });
}

/** Polls the job until it is completed or failed, and returns that record. */
async function settled(emulator: TestEmulator, apiKey: string, jobId: string): Promise<JobRecord> {
  return waitFor(
    async () => {
      const job = await getJob(emulator, apiKey, jobId);
      expect(job.status).toBe(200);
      return job.json.data.status === 'completed' || job.json.data.status === 'failed' ? job.json.data : undefined;
    },
    10_000,
    `job ${jobId} to finish`,
  );
}

/** Every results page of a completed job, following cursors; checks each page is free. */
async function allResults(emulator: TestEmulator, apiKey: string, jobId: string, limit?: number): Promise<{ items: Item[]; pages: PageMeta[] }> {
  const items: Item[] = [];
  const pages: PageMeta[] = [];
  let cursor: string | undefined;
  do {
    const query = [limit === undefined ? '' : `limit=${limit}`, cursor === undefined ? '' : `cursor=${q(cursor)}`].filter(Boolean).join('&');
    const page = await emulator.call<Envelope<Item[]>>(`/jobs/${jobId}/results${query ? `?${query}` : ''}`, { apiKey });
    expect(page.status).toBe(200);
    expect(page.headers['x-credits-charged']).toBe('0');
    const meta = page.json.meta as PageMeta;
    expect(meta.count).toBe(page.json.data.length);
    items.push(...page.json.data);
    pages.push(meta);
    cursor = meta.cursor;
    if (meta.has_more) expect(cursor).toEqual(expect.any(String));
    else expect(cursor).toBeUndefined();
    expect(pages.length).toBeLessThan(200);
  } while (cursor !== undefined);
  return { items, pages };
}

function tamper(token: string): string {
  // Change one character of the signed body (the part before the dot) to another base64url character.
  const index = Math.floor(token.indexOf('.') / 2);
  const replacement = token[index] === 'A' ? 'B' : 'A';
  return `${token.slice(0, index)}${replacement}${token.slice(index + 1)}`;
}

describe('jobs (fast emulator, jobStepMs 20)', () => {
  let emulator: TestEmulator;
  let handles: string[];
  const receivers: TestReceiver[] = [];

  beforeAll(async () => {
    emulator = await startTestEmulator({ jobStepMs: 20, webhookCa: devCa(), webhookRetryScheduleMs: [50, 100, 200] });
    handles = (await emulator.catalog()).tiktok.handles;
    expect(handles.length).toBeGreaterThanOrEqual(3);
  });

  afterEach(async () => {
    await Promise.all(receivers.splice(0).map((receiver) => receiver.close()));
  });

  afterAll(async () => {
    await emulator?.close();
  });

  it('prices tiktok channel-videos at 3 credits a video, as config/prices.yaml says', () => {
    expect(VIDEO_PRICE).toBe(3);
  });

  it('answers limit 50 with a charged page, and limit 51 with a free 202 job record', async () => {
    const apiKey = await newKey(emulator, 100_000);
    const handle = handles[0] as string;

    const page = await emulator.call<Envelope<Item[]>>(`/tiktok/channel-videos?handle=${q(handle)}&limit=50`, { apiKey });
    expect(page.status).toBe(200);
    expect(page.json.data).toHaveLength(50);
    expect(page.headers['x-credits-charged']).toBe(String(50 * VIDEO_PRICE));

    const ledgerBefore = await emulator.ledger(apiKey);
    expect(ledgerBefore).toHaveLength(1);
    const balanceBefore = 100_000 - 50 * VIDEO_PRICE;

    const created = await createJob(emulator, apiKey, handle, 51);
    expect(created.status).toBe(202);
    const job = created.json.data;
    expect(job.job_id).toMatch(/^job_[A-Za-z0-9]+$/);
    expect(job.status).toBe('queued');
    expect(job.endpoint).toBe('tiktok/channel-videos');
    expect(job.params).toEqual({ handle, limit: '51' });
    expect(job.created_at).toMatch(ISO_SECONDS);
    expect(Math.abs(Date.parse(job.created_at) - Date.now())).toBeLessThan(5_000);
    expect(created.json.request_id).toMatch(/^req_/);
    // Creating a job is free.
    expect(created.headers['x-credits-charged']).toBe('0');
    expect(created.headers['x-credits-remaining']).toBe(String(balanceBefore));
    expect(await emulator.ledger(apiKey)).toEqual(ledgerBefore);

    const fetched = await getJob(emulator, apiKey, job.job_id);
    expect(fetched.status).toBe(200);
    expect(fetched.json.data.job_id).toBe(job.job_id);
    expect(fetched.headers['x-credits-charged']).toBe('0');

    const finished = await settled(emulator, apiKey, job.job_id);
    expect(finished.status).toBe('completed');
    expect(finished.item_count).toBe(51);
  });

  it('accepts limit 10,000 as a job and rejects 10,001 with 400 invalid_parameter', async () => {
    const apiKey = await newKey(emulator, 100_000);
    const handle = handles[1] as string;
    const profileBefore = await emulator.call<Envelope<{ metrics: { posts: number } }>>(`/tiktok/channel-stats?handle=${q(handle)}`);
    expect(profileBefore.status).toBe(200);

    const tooMany = await createJob(emulator, apiKey, handle, 10_001);
    expect(tooMany.status).toBe(400);
    const error = (tooMany.json as unknown as ErrorBody).error;
    expect(error.code).toBe('invalid_parameter');
    expect(error.param).toBe('limit');

    const created = await createJob(emulator, apiKey, handle, 10_000);
    expect(created.status).toBe(202);
    expect(created.json.data.params.limit).toBe('10000');

    // The account has fewer videos than the limit: the job delivers them all and is charged for
    // what it delivered, not for the limit.
    const job = await settled(emulator, apiKey, created.json.data.job_id);
    const profileAfter = await emulator.call<Envelope<{ metrics: { posts: number } }>>(`/tiktok/channel-stats?handle=${q(handle)}`);
    expect(job.status).toBe('completed');
    const itemCount = job.item_count as number;
    expect(itemCount).toBeGreaterThanOrEqual(Math.min(profileBefore.json.data.metrics.posts, profileAfter.json.data.metrics.posts));
    expect(itemCount).toBeLessThanOrEqual(Math.max(profileBefore.json.data.metrics.posts, profileAfter.json.data.metrics.posts));
    expect(itemCount).toBeGreaterThanOrEqual(500);
    expect(itemCount).toBeLessThan(10_000);
    expect(job.credits_charged).toBe(itemCount * VIDEO_PRICE);

    const ledger = await emulator.ledger(apiKey);
    expect(ledger).toHaveLength(1);
    expect(ledger[0]).toMatchObject({ job_id: job.job_id, endpoint: 'tiktok/channel-videos', units: itemCount, credits: itemCount * VIDEO_PRICE });

    const { items, pages } = await allResults(emulator, apiKey, job.job_id, 1_000);
    expect(items).toHaveLength(itemCount);
    expect(new Set(items.map((item) => item.id)).size).toBe(itemCount);
    expect(pages.map((page) => page.count)).toEqual(Array.from({ length: Math.ceil(itemCount / 1_000) }, (_, i) => Math.min(1_000, itemCount - i * 1_000)));
    expect(await emulator.ledger(apiKey)).toHaveLength(1);
  });

  it('charges a completed job once, at items delivered × price, with one ledger row carrying the job_id', async () => {
    const credits = 10_000;
    const apiKey = await newKey(emulator, credits);
    const created = await createJob(emulator, apiKey, handles[0] as string, 250);
    expect(created.status).toBe(202);
    const jobId = created.json.data.job_id;

    const job = await settled(emulator, apiKey, jobId);
    expect(job).toMatchObject({ job_id: jobId, status: 'completed', endpoint: 'tiktok/channel-videos', item_count: 250, credits_charged: 250 * VIDEO_PRICE, error: null });
    expect(job.completed_at).toMatch(ISO_SECONDS);
    expect(Date.parse(job.completed_at as string)).toBeGreaterThanOrEqual(Date.parse(job.created_at));

    const ledger = await emulator.ledger(apiKey);
    expect(ledger).toHaveLength(1);
    expect(ledger[0]).toMatchObject({ api_key: apiKey, job_id: jobId, endpoint: 'tiktok/channel-videos', units: 250, credits: 250 * VIDEO_PRICE });

    // Reading the job and its results afterwards charges nothing more.
    const again = await getJob(emulator, apiKey, jobId);
    expect(again.headers['x-credits-charged']).toBe('0');
    expect(again.headers['x-credits-remaining']).toBe(String(credits - 250 * VIDEO_PRICE));
    await allResults(emulator, apiKey, jobId);
    await sleep(100);
    expect(await emulator.ledger(apiKey)).toEqual(ledger);
    expect((await getJob(emulator, apiKey, jobId)).headers['x-credits-remaining']).toBe(String(credits - 250 * VIDEO_PRICE));
  });

  it('pages results 100 at a time by default, up to 1,000, for free and without duplicates', async () => {
    const apiKey = await newKey(emulator, 10_000);
    const created = await createJob(emulator, apiKey, handles[2] as string, 250);
    const job = await settled(emulator, apiKey, created.json.data.job_id);
    expect(job.status).toBe('completed');
    const ledger = await emulator.ledger(apiKey);

    const byDefault = await allResults(emulator, apiKey, job.job_id);
    expect(byDefault.pages.map((page) => [page.count, page.limit, page.has_more])).toEqual([
      [100, 100, true],
      [100, 100, true],
      [50, 100, false],
    ]);
    expect(byDefault.pages.every((page) => page.item === 'video')).toBe(true);
    expect(byDefault.items).toHaveLength(job.item_count as number);
    expect(new Set(byDefault.items.map((item) => item.id)).size).toBe(250);

    const inOne = await allResults(emulator, apiKey, job.job_id, 1_000);
    expect(inOne.pages).toHaveLength(1);
    expect(inOne.pages[0]).toMatchObject({ count: 250, limit: 1_000, has_more: false });
    expect(inOne.items.map((item) => item.id)).toEqual(byDefault.items.map((item) => item.id));

    const small = await allResults(emulator, apiKey, job.job_id, 7);
    expect(small.pages).toHaveLength(36);
    expect(small.items.map((item) => item.id)).toEqual(byDefault.items.map((item) => item.id));

    for (const limit of ['1001', '0', 'ten']) {
      const bad = await emulator.call<ErrorBody>(`/jobs/${job.job_id}/results?limit=${limit}`, { apiKey });
      expect(bad.status, `limit=${limit}`).toBe(400);
      expect(bad.json.error).toMatchObject({ code: 'invalid_parameter', param: 'limit' });
    }

    // Not one results page was charged.
    expect(await emulator.ledger(apiKey)).toEqual(ledger);
  });

  it('continues from a page cursor when a job is created with one', async () => {
    const apiKey = await newKey(emulator, 10_000);
    const handle = handles[0] as string;
    const first = await emulator.call<Envelope<Item[]>>(`/tiktok/channel-videos?handle=${q(handle)}&limit=20`, { apiKey });
    expect(first.status).toBe(200);
    const cursor = first.json.meta?.cursor as string;
    expect(cursor).toEqual(expect.any(String));

    const created = await createJob(emulator, apiKey, handle, 100, `&cursor=${q(cursor)}`);
    expect(created.status).toBe(202);
    const job = await settled(emulator, apiKey, created.json.data.job_id);
    expect(job.item_count).toBe(100);
    const { items } = await allResults(emulator, apiKey, job.job_id);
    const firstIds = new Set(first.json.data.map((item) => item.id));
    expect(items.filter((item) => firstIds.has(item.id))).toEqual([]);
    expect(new Set(items.map((item) => item.id)).size).toBe(100);
  });

  it('signs results cursors: a tampered or foreign cursor answers 400 invalid_cursor', async () => {
    const apiKey = await newKey(emulator, 10_000);
    const [a, b] = await Promise.all([createJob(emulator, apiKey, handles[0] as string, 150), createJob(emulator, apiKey, handles[1] as string, 150)]);
    const jobA = await settled(emulator, apiKey, a.json.data.job_id);
    const jobB = await settled(emulator, apiKey, b.json.data.job_id);
    expect([jobA.status, jobB.status]).toEqual(['completed', 'completed']);

    const firstA = await emulator.call<Envelope<Item[]>>(`/jobs/${jobA.job_id}/results`, { apiKey });
    const cursor = firstA.json.meta?.cursor as string;
    expect(cursor).toEqual(expect.any(String));

    const valid = await emulator.call<Envelope<Item[]>>(`/jobs/${jobA.job_id}/results?cursor=${q(cursor)}`, { apiKey });
    expect(valid.status).toBe(200);
    expect(valid.json.data).toHaveLength(50);

    const signature = cursor.slice(cursor.indexOf('.') + 1);
    const forgedSignature = `${cursor.slice(0, cursor.indexOf('.') + 1)}${signature[0] === 'A' ? 'B' : 'A'}${signature.slice(1)}`;
    // An offset of 0 dressed as a cursor: a well-formed body with no valid signature.
    const unsigned = `${Buffer.from(JSON.stringify({ s: 'jobs/results', i: jobA.job_id, p: 0, x: Date.now() + 3_600_000 })).toString('base64url')}.${signature}`;
    const listPage = await emulator.call<Envelope<Item[]>>(`/tiktok/channel-videos?handle=${q(handles[0] as string)}&limit=5`, { apiKey });
    const listCursor = listPage.json.meta?.cursor as string;
    expect(listCursor).toEqual(expect.any(String));

    const cases: [string, string, string][] = [
      ['tampered body', jobA.job_id, tamper(cursor)],
      ['tampered signature', jobA.job_id, forgedSignature],
      ['forged payload', jobA.job_id, unsigned],
      ['garbage', jobA.job_id, 'not-a-cursor'],
      ["another job's cursor", jobB.job_id, cursor],
      ['a list cursor', jobA.job_id, listCursor],
    ];
    for (const [what, jobId, text] of cases) {
      const answer = await emulator.call<ErrorBody>(`/jobs/${jobId}/results?cursor=${q(text)}`, { apiKey });
      expect(answer.status, what).toBe(400);
      expect(answer.json.error, what).toMatchObject({ code: 'invalid_cursor', param: 'cursor' });
      expect(answer.headers['x-credits-charged'], what).toBe('0');
    }
  });

  it("hides a key's jobs from other keys and answers 404 job_not_found for unknown jobs", async () => {
    const owner = await newKey(emulator, 10_000);
    const stranger = await newKey(emulator, 10_000);
    const created = await createJob(emulator, owner, handles[0] as string, 60);
    const job = await settled(emulator, owner, created.json.data.job_id);
    expect(job.status).toBe('completed');
    expect((await emulator.call(`/jobs/${job.job_id}/results`, { apiKey: owner })).status).toBe(200);

    for (const path of [`/jobs/${job.job_id}`, `/jobs/${job.job_id}/results`, '/jobs/job_00000000000000000000', '/jobs/job_00000000000000000000/results', '/jobs/nonsense']) {
      const apiKey = path.includes(job.job_id) ? stranger : owner;
      const answer = await emulator.call<ErrorBody>(path, { apiKey });
      expect(answer.status, path).toBe(404);
      expect(answer.json.error.code, path).toBe('job_not_found');
    }
    // Without a key at all, the job is not even looked up.
    expect((await emulator.call(`/jobs/${job.job_id}`, { apiKey: null })).status).toBe(401);
  });

  it('refuses to create a job the balance cannot cover (limit × price) with 402 insufficient_credits', async () => {
    const apiKey = await newKey(emulator, 500);
    const handle = handles[0] as string;

    const refused = await createJob(emulator, apiKey, handle, 167); // 167 × 3 = 501 > 500
    expect(refused.status).toBe(402);
    const error = (refused.json as unknown as ErrorBody).error;
    expect(error.code).toBe('insufficient_credits');
    expect(error.required_credits).toBe(167 * VIDEO_PRICE);
    expect(Number.isInteger(error.required_credits)).toBe(true);
    expect(error.remaining_credits).toBe(500);
    expect(Number.isInteger(error.remaining_credits)).toBe(true);
    expect(refused.headers['x-credits-charged']).toBe('0');
    expect(refused.headers['x-credits-remaining']).toBe('500');
    expect(await emulator.ledger(apiKey)).toEqual([]);

    const accepted = await createJob(emulator, apiKey, handle, 166); // 498 ≤ 500
    expect(accepted.status).toBe(202);
    const job = await settled(emulator, apiKey, accepted.json.data.job_id);
    expect(job).toMatchObject({ status: 'completed', item_count: 166, credits_charged: 166 * VIDEO_PRICE });
    expect((await getJob(emulator, apiKey, job.job_id)).headers['x-credits-remaining']).toBe(String(500 - 166 * VIDEO_PRICE));
  });

  it('delivers job.completed to subscribed webhooks with the job outcome', async () => {
    const receiver = await startHttpsReceiver();
    receivers.push(receiver);
    const apiKey = await newKey(emulator, 10_000);
    const other = await newKey(emulator, 10_000);
    const hook = await emulator.call<Envelope<{ webhook_id: string; secret: string }>>('/webhooks', {
      apiKey,
      body: { url: receiver.url, events: ['job.completed'] },
    });
    expect(hook.status).toBe(201);
    receiver.secret = hook.json.data.secret;

    const created = await createJob(emulator, apiKey, handles[0] as string, 75);
    const job = await settled(emulator, apiKey, created.json.data.job_id);
    // Another key's job does not reach this key's endpoint.
    const foreign = await createJob(emulator, other, handles[0] as string, 60);
    await settled(emulator, other, foreign.json.data.job_id);

    const delivery = await waitFor(() => receiver.deliveries[0], 5_000, 'the job.completed delivery');
    expect(delivery.verified).toBe(true);
    expect(delivery.payload?.type).toBe('job.completed');
    expect(delivery.payload?.data).toEqual({ job_id: job.job_id, status: 'completed', item_count: 75, credits_charged: 75 * VIDEO_PRICE });
    await sleep(150);
    expect(receiver.deliveries).toHaveLength(1);
  });
});

describe('jobs (slow emulator, jobStepMs 300)', () => {
  let emulator: TestEmulator;
  let handle: string;
  const receivers: TestReceiver[] = [];

  beforeAll(async () => {
    emulator = await startTestEmulator({ jobStepMs: 300, webhookCa: devCa(), webhookRetryScheduleMs: [50, 100, 200] });
    handle = (await emulator.catalog()).tiktok.handles[0] as string;
  });

  afterEach(async () => {
    await Promise.all(receivers.splice(0).map((receiver) => receiver.close()));
  });

  afterAll(async () => {
    await emulator?.close();
  });

  it('goes queued → running → completed, answering 409 job_not_ready for results until done', async () => {
    const apiKey = await newKey(emulator, 10_000);
    const created = await createJob(emulator, apiKey, handle, 120);
    expect(created.status).toBe(202);
    const jobId = created.json.data.job_id;
    const seen: string[] = [];
    let notReady = 0;

    const job = await waitFor(
      async () => {
        // Results first, then the job: a status is only ever followed by a later one, so when the
        // job is still unfinished afterwards, it was unfinished when the results were asked for.
        const results = await emulator.call<ErrorBody>(`/jobs/${jobId}/results`, { apiKey });
        const current = (await getJob(emulator, apiKey, jobId)).json.data;
        if (seen.at(-1) !== current.status) seen.push(current.status);
        if (current.status === 'completed' || current.status === 'failed') return current;
        expect(current).toMatchObject({ item_count: null, credits_charged: 0, completed_at: null, error: null });
        expect(results.status).toBe(409);
        expect(results.json.error.code).toBe('job_not_ready');
        expect(results.headers['x-credits-charged']).toBe('0');
        notReady++;
        return undefined;
      },
      10_000,
      'the slow job',
    );
    expect(seen).toEqual(['queued', 'running', 'completed']);
    expect(notReady).toBeGreaterThanOrEqual(2);
    expect(job).toMatchObject({ status: 'completed', item_count: 120, credits_charged: 120 * VIDEO_PRICE });
    expect(await emulator.ledger(apiKey)).toHaveLength(1);
    expect((await allResults(emulator, apiKey, jobId)).items).toHaveLength(120);
  });

  it('fails with insufficient_credits and charges nothing when the balance drops before completion', async () => {
    const receiver = await startHttpsReceiver();
    receivers.push(receiver);
    const apiKey = await newKey(emulator, 10_000);
    const hook = await emulator.call<Envelope<{ secret: string }>>('/webhooks', { apiKey, body: { url: receiver.url, events: ['job.completed'] } });
    expect(hook.status).toBe(201);
    receiver.secret = hook.json.data.secret;

    const created = await createJob(emulator, apiKey, handle, 300); // worst case 900 ≤ 10,000
    expect(created.status).toBe(202);
    const jobId = created.json.data.job_id;
    const plan = await emulator.admin('plan', { api_key: apiKey, plan: 'tiny', credits: 1 });
    expect(plan.status).toBe(200);
    expect((await getJob(emulator, apiKey, jobId)).json.data.status).not.toBe('completed');

    const job = await settled(emulator, apiKey, jobId);
    expect(job.status).toBe('failed');
    expect(job.error?.code).toBe('insufficient_credits');
    expect(job.error?.message).toEqual(expect.any(String));
    expect(job.credits_charged).toBe(0);
    expect(job.completed_at).toMatch(ISO_SECONDS);

    expect(await emulator.ledger(apiKey)).toEqual([]);
    const after = await getJob(emulator, apiKey, jobId);
    expect(after.headers['x-credits-remaining']).toBe('1');

    const results = await emulator.call<ErrorBody>(`/jobs/${jobId}/results`, { apiKey });
    expect(results.status).toBe(409);

    const delivery = await waitFor(() => receiver.deliveries[0], 5_000, 'job.completed for the failed job');
    expect(delivery.verified).toBe(true);
    expect(delivery.payload?.type).toBe('job.completed');
    expect(delivery.payload?.data).toMatchObject({ job_id: jobId, status: 'failed', credits_charged: 0 });
    expect(delivery.payload?.data.item_count).toEqual(expect.any(Number));
    await sleep(100);
    expect(receiver.deliveries).toHaveLength(1);
  });
});
