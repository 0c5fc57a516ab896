import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorBodySchema } from '../../src/api-catalog/resources.js';
import { http, q, startTestEmulator, waitFor, type TestEmulator } from '../support/emulator.js';

let emulator: TestEmulator;
let handle: string;
let videoUrl: string;
let postUrl: string;

beforeAll(async () => {
  emulator = await startTestEmulator();
  const catalog = await emulator.catalog();
  handle = catalog.tiktok.handles[1]!;
  videoUrl = (await emulator.call<{ data: { url: string }[] }>(`/tiktok/channel-videos?handle=${handle}&limit=1`)).json.data[0]!.url;
  postUrl = (await emulator.call<{ data: { url: string }[] }>(`/instagram/channel-posts?handle=${catalog.instagram.handles[1]}&limit=1`)).json.data[0]!.url;
});
afterAll(() => emulator.close());

/** Asserts an error answer: status, code, param, the envelope, and that nothing was charged. */
async function expectError(path: string, status: number, code: string, param?: string, init: Parameters<TestEmulator['call']>[1] = {}) {
  const ledgerBefore = (await emulator.ledger()).length;
  const result = await emulator.call(path, init);
  expect(result.status, result.text).toBe(status);
  const body = errorBodySchema.parse(result.json);
  expect(body.error.code).toBe(code);
  if (param) expect(body.error.param).toBe(param);
  expect(body.error.message.length).toBeGreaterThan(10);
  expect((await emulator.ledger()).length).toBe(ledgerBefore);
  if (status !== 401) expect(result.headers['x-credits-charged']).toBe('0');
  return { ...result, body };
}

describe('authentication', () => {
  it('401 without a key and with an unknown key, with no credit headers', async () => {
    const missing = await expectError(`/tiktok/channel-stats?handle=${handle}`, 401, 'missing_api_key', undefined, { apiKey: null });
    const invalid = await expectError(`/tiktok/channel-stats?handle=${handle}`, 401, 'invalid_api_key', undefined, { apiKey: 'sk_live_nobody' });
    for (const result of [missing, invalid]) {
      expect(result.headers['x-credits-charged']).toBeUndefined();
      expect(result.headers['x-credits-remaining']).toBeUndefined();
      expect(result.headers['x-ratelimit-limit']).toBeDefined();
    }
  });

  it('auth applies to webhook endpoints too', async () => {
    await expectError('/webhooks', 401, 'missing_api_key', undefined, { apiKey: null });
  });

  it('every /v1 answer carries the rate-limit headers and a request id', async () => {
    const result = await emulator.call(`/tiktok/channel-stats?handle=${handle}`);
    for (const header of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) expect(Number(result.headers[header])).toBeGreaterThanOrEqual(0);
    expect(result.headers['x-request-id']).toBe((result.json as { request_id: string }).request_id);
  });
});

describe('400 for invalid or missing parameters, never charged', () => {
  it('missing identifying parameters', async () => {
    await expectError('/tiktok/stats', 400, 'missing_parameter', 'url');
    await expectError('/tiktok/channel-videos', 400, 'missing_parameter', 'handle');
    await expectError('/tiktok/search', 400, 'missing_parameter', 'query');
  });

  it('a URL of another platform, or not a content URL', async () => {
    await expectError(`/instagram/stats?url=${q(videoUrl)}`, 400, 'invalid_parameter', 'url');
    await expectError(`/tiktok/stats?url=${q(postUrl)}`, 400, 'invalid_parameter', 'url');
    await expectError(`/tiktok/stats?url=${q('https://example.com/video/1')}`, 400, 'invalid_parameter', 'url');
  });

  it('a handle starting with @', async () => {
    await expectError(`/tiktok/channel-stats?handle=${q(`@${handle}`)}`, 400, 'invalid_parameter', 'handle');
  });

  it.each(['0', '-3', '2.5', 'ten', '', '10001'])('limit=%j', async (limit) => {
    await expectError(`/tiktok/channel-videos?handle=${handle}&limit=${q(limit)}`, 400, 'invalid_parameter', 'limit');
  });

  it('an unknown format, or one the endpoint does not offer', async () => {
    await expectError(`/tiktok/stats?url=${q(videoUrl)}&format=xml`, 400, 'unsupported_format', 'format');
    await expectError(`/tiktok/stats?url=${q(videoUrl)}&format=csv`, 400, 'unsupported_format', 'format');
    await expectError(`/tiktok/channel-videos?handle=${handle}&format=text`, 400, 'unsupported_format', 'format');
  });

  it('fresh that is not a boolean', async () => {
    await expectError(`/tiktok/stats?url=${q(videoUrl)}&fresh=yes`, 400, 'invalid_parameter', 'fresh');
  });

  it('a malformed cursor', async () => {
    await expectError(`/tiktok/channel-videos?handle=${handle}&cursor=garbage`, 400, 'invalid_cursor', 'cursor');
  });

  it('transcript or summary of an instagram photo post is unsupported_content', async () => {
    await expectError(`/instagram/transcript?url=${q(postUrl)}`, 400, 'unsupported_content', 'url');
    await expectError(`/instagram/summary?url=${q(postUrl)}`, 400, 'unsupported_content', 'url');
  });
});

describe('long URLs and cursors are answered, never reset', () => {
  it('a URL over 16 KiB (without its cursor) is 414 uri_too_long in the error envelope, before authentication', async () => {
    const ledgerBefore = (await emulator.ledger()).length;
    const tooLong = await emulator.call(`/tiktok/search?query=${'x'.repeat(64 * 1024)}`);
    expect(tooLong.status).toBe(414);
    const body = errorBodySchema.parse(tooLong.json);
    expect(body.error).toMatchObject({ code: 'uri_too_long', message: expect.stringContaining('at most 16384') });
    expect(tooLong.headers['x-request-id']).toBe(body.request_id);
    expect((await emulator.ledger()).length).toBe(ledgerBefore);
    const anonymous = await emulator.call(`/tiktok/search?query=${'y'.repeat(100 * 1024)}`, { apiKey: null });
    expect([anonymous.status, (anonymous.json as { error: { code: string } }).error.code]).toEqual([414, 'uri_too_long']);
    const admin = await http<{ error: { code: string } }>(`${emulator.origin}/_emulator/catalog?pad=${'z'.repeat(70 * 1024)}`);
    expect([admin.status, admin.json.error.code]).toEqual([414, 'uri_too_long']);
  });

  it('a URL just under the limit is answered by the endpoint', async () => {
    const path = '/tiktok/search?limit=1&query=';
    const result = await emulator.call(`${path}${'q'.repeat(16 * 1024 - '/v1'.length - path.length)}`);
    expect(result.status, result.text).toBe(200);
  });

  it('a 100 KB cursor is 400 invalid_cursor, on lists and on job results, and nothing is charged', async () => {
    const cursor = 'c'.repeat(100 * 1024);
    const list = await expectError(`/tiktok/channel-videos?handle=${handle}&cursor=${cursor}`, 400, 'invalid_cursor', 'cursor');
    expect(list.body.error.message).toContain(`${100 * 1024} characters`);
    const { json } = await emulator.call<{ data: { job_id: string } }>(`/tiktok/channel-videos?handle=${handle}&limit=60`);
    await waitFor(async () => ((await emulator.call<{ data: { status: string } }>(`/jobs/${json.data.job_id}`)).json.data.status === 'completed' ? true : undefined));
    await expectError(`/jobs/${json.data.job_id}/results?cursor=${cursor}`, 400, 'invalid_cursor', 'cursor');
  });
});

describe('404 for what does not exist', () => {
  it('unknown handle, content item, route, job and webhook', async () => {
    await expectError('/tiktok/channel-stats?handle=nobody_here', 404, 'handle_not_found', 'handle');
    const forged = videoUrl.replace(/\d{6}$/, '999999');
    await expectError(`/tiktok/stats?url=${q(forged)}`, 404, 'content_not_found', 'url');
    await expectError(`/tiktok/stats?url=${q('https://www.tiktok.com/@x/video/7301234567890123456')}`, 404, 'content_not_found', 'url');
    await expectError(`/instagram/stats?url=${q('https://www.instagram.com/reel/Czzzzzzzzzz/')}`, 404, 'content_not_found', 'url');
    await expectError('/tiktok/channel-shorts?handle=x', 404, 'route_not_found');
    await expectError('/nowhere', 404, 'route_not_found');
    await expectError('/jobs/job_0000', 404, 'job_not_found');
    await expectError('/webhooks/wh_0000', 404, 'webhook_not_found', undefined, { method: 'DELETE' });
  });
});

describe('platform A download', () => {
  it('answers 503 download_unavailable on every call and charges nothing', async () => {
    await expectError(`/tiktok/download?url=${q(videoUrl)}`, 503, 'download_unavailable');
    await expectError(`/tiktok/download?url=${q(videoUrl)}&fresh=true`, 503, 'download_unavailable');
  });
});

describe('402 insufficient_credits', () => {
  it('refuses a call whose worst case the balance cannot cover, and charges nothing', async () => {
    const apiKey = 'sk_live_poor_team';
    expect((await emulator.admin('keys', { api_key: apiKey, credits: 59 })).status).toBe(201);
    // A default page of channel-videos can cost 20 × 3 = 60 credits: more than 59.
    const refused = await expectError(`/tiktok/channel-videos?handle=${handle}`, 402, 'insufficient_credits', undefined, { apiKey });
    expect(refused.body.error.required_credits).toBe(60);
    expect(refused.body.error.remaining_credits).toBe(59);
    expect(refused.headers['x-credits-remaining']).toBe('59');
    // A smaller page fits the balance and is served.
    const served = await emulator.call(`/tiktok/channel-videos?handle=${handle}&limit=19`, { apiKey });
    expect(served.status).toBe(200);
    expect(served.headers['x-credits-remaining']).toBe('2');
  });
});
