import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { Agent, request } from 'undici';
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { JobCompletions } from '../../src/api/job-completions.js';
import type { WebhookPayload } from '../../src/api-catalog/resources.js';
import { startWebhookReceiver, type WebhookReceiver } from '../../src/webhooks/receiver.js';
import { startTestEmulator, waitFor } from '../support/emulator.js';
import { clientFor, memoryLogger } from '../support/client.js';
import { DEV_CA_FILE, DEV_CERT_FILE, DEV_KEY_FILE, devCa } from '../support/https-receiver.js';
import { runPythonAsync } from '../support/python.js';

const SECRET = `whsec_${Buffer.from('a test secret of 24 bytes!').toString('base64')}`;
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const trustingDevCa = new Agent({ connect: { ca: devCa() } });

async function receiverWith(options: { journalFile?: string; onEvent?: (event: WebhookPayload, id: string) => void | Promise<void>; secrets?: string[] | (() => string[]) } = {}) {
  const events: { id: string; event: WebhookPayload }[] = [];
  const memory = memoryLogger();
  const receiver = await startWebhookReceiver({
    cert: readFileSync(DEV_CERT_FILE),
    key: readFileSync(DEV_KEY_FILE),
    secrets: options.secrets ?? [SECRET],
    journalFile: options.journalFile ?? join(mkdtempSync(join(tmpdir(), 'receiver-')), 'journal.jsonl'),
    logger: memory.logger,
    onEvent: options.onEvent ?? ((event, id) => void events.push({ id, event })),
  });
  cleanups.push(() => receiver.close());
  return { receiver, events, lines: memory.lines };
}

async function deliver(receiver: WebhookReceiver, init: { id: string; body: string; secret?: string; at?: Date; signature?: string; contentType?: string }) {
  return (await deliverWithAnswer(receiver, init)).status;
}

async function deliverWithAnswer(receiver: WebhookReceiver, init: { id: string; body: string; secret?: string; at?: Date; signature?: string; contentType?: string }) {
  const at = init.at ?? new Date();
  const signature = init.signature ?? new Webhook(init.secret ?? SECRET).sign(init.id, at, init.body);
  const response = await request(receiver.url, {
    method: 'POST',
    dispatcher: trustingDevCa,
    headers: { 'content-type': init.contentType ?? 'application/json', 'webhook-id': init.id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': signature },
    body: init.body,
  });
  return { status: response.statusCode, answer: (await response.body.json()) as { status: string } };
}

const body = (type = 'job.completed', data: Record<string, unknown> = { job_id: 'job_1' }) => JSON.stringify({ type, timestamp: new Date().toISOString(), data });

describe('the webhook receiver', () => {
  it('accepts a signed delivery, once it is in the journal, and hands it to the handler', async () => {
    const journalFile = join(mkdtempSync(join(tmpdir(), 'receiver-')), 'journal.jsonl');
    const { receiver, events } = await receiverWith({ journalFile });
    expect(await deliver(receiver, { id: 'msg_1', body: body() })).toBe(202);
    expect(readFileSync(journalFile, 'utf8')).toContain('"id":"msg_1"');
    await waitFor(() => (events.length === 1 ? true : undefined));
    expect(events[0]).toMatchObject({ id: 'msg_1', event: { type: 'job.completed', data: { job_id: 'job_1' } } });
  });

  it('rejects forged signatures and stale or future timestamps, and hands none of them on', async () => {
    const { receiver, events } = await receiverWith();
    expect(await deliver(receiver, { id: 'msg_forged', body: body(), secret: `whsec_${Buffer.from('another secret, not ours').toString('base64')}` })).toBe(401);
    expect(await deliver(receiver, { id: 'msg_tampered', body: body(), signature: new Webhook(SECRET).sign('msg_tampered', new Date(), body('credits.low')) })).toBe(401);
    expect(await deliver(receiver, { id: 'msg_old', body: body(), at: new Date(Date.now() - 6 * 60_000) })).toBe(400);
    expect(await deliver(receiver, { id: 'msg_future', body: body(), at: new Date(Date.now() + 6 * 60_000) })).toBe(400);
    expect(await deliver(receiver, { id: 'msg_edge', body: body(), at: new Date(Date.now() - 4 * 60_000) })).toBe(202);
    await waitFor(() => (events.length === 1 ? true : undefined));
    expect(events.map((event) => event.id)).toEqual(['msg_edge']);
  });

  it('a forged delivery is forged whatever its timestamp; only one signed by us is stale', async () => {
    const { receiver, events, lines } = await receiverWith();
    const longAgo = new Date(Date.now() - 60 * 60_000);
    const otherSecret = `whsec_${Buffer.from('another secret, not ours').toString('base64')}`;
    expect(await deliverWithAnswer(receiver, { id: 'msg_forged_old', body: body(), at: longAgo, secret: otherSecret })).toEqual({ status: 401, answer: { status: 'forged' } });
    expect(await deliverWithAnswer(receiver, { id: 'msg_garbage_old', body: body(), at: longAgo, signature: 'v1,bm90IGEgc2lnbmF0dXJl' })).toEqual({ status: 401, answer: { status: 'forged' } });
    expect(await deliverWithAnswer(receiver, { id: 'msg_ours_old', body: body(), at: longAgo })).toEqual({ status: 400, answer: { status: 'stale' } });
    const verdicts = lines.filter((line) => line.includes('webhook delivery rejected')).map((line) => JSON.parse(line) as { webhookId: string; verdict: string });
    expect(verdicts.map(({ webhookId, verdict }) => [webhookId, verdict])).toEqual([['msg_forged_old', 'forged'], ['msg_garbage_old', 'forged'], ['msg_ours_old', 'stale']]);
    expect(lines.join('')).not.toContain(SECRET.slice('whsec_'.length));
    expect(events).toEqual([]);
  });

  it('a signed body that is not JSON is answered 400 invalid_json and logged as such, not as forged', async () => {
    const { receiver, events, lines } = await receiverWith();
    expect(await deliverWithAnswer(receiver, { id: 'msg_broken', body: '{"type": "job.completed", ' })).toEqual({ status: 400, answer: { status: 'invalid_json' } });
    const line = lines.find((text) => text.includes('msg_broken'));
    expect(line).toContain('signature valid, body is not JSON');
    expect(line).not.toContain('forged');
    expect(await deliverWithAnswer(receiver, { id: 'msg_shape', body: '{"type": 1}' })).toEqual({ status: 400, answer: { status: 'invalid_payload' } });
    expect(events).toEqual([]);
  });

  it('answers 413 to a body over 1 MiB, announced or not, and keeps serving', async () => {
    const { receiver, events } = await receiverWith();
    const big = JSON.stringify({ type: 'job.completed', timestamp: new Date().toISOString(), data: { pad: 'x'.repeat(1 << 20) } });
    expect(await deliverWithAnswer(receiver, { id: 'msg_big', body: big })).toEqual({ status: 413, answer: { status: 'body_too_large' } });
    // Chunked, without Content-Length: the limit is found while reading.
    const chunked = await request(receiver.url, {
      method: 'POST',
      dispatcher: trustingDevCa,
      headers: { 'content-type': 'application/json', 'webhook-id': 'msg_stream', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': 'v1,x' },
      body: Readable.from((function* () {
        for (let i = 0; i < 40; i += 1) yield Buffer.alloc(64 * 1024, 0x20);
      })()),
    });
    expect(chunked.statusCode).toBe(413);
    expect(await chunked.body.json()).toEqual({ status: 'body_too_large' });
    expect(await deliver(receiver, { id: 'msg_small', body: body() })).toBe(202);
    await waitFor(() => (events.length === 1 ? true : undefined));
  });

  it('answers 413 to a 10 MB body every time, never cutting the sender off before it reads the answer', async () => {
    const { receiver } = await receiverWith();
    const huge = JSON.stringify({ type: 'job.completed', timestamp: new Date().toISOString(), data: { pad: 'x'.repeat(10 << 20) } });
    const answers: unknown[] = [];
    for (let i = 0; i < 8; i++) answers.push(await deliverWithAnswer(receiver, { id: `msg_huge_${i}`, body: huge }).catch((error: Error) => (error.cause as { code?: string } | undefined)?.code ?? error.message));
    // Chunked, without Content-Length: found too large while reading, with most of it still to come.
    for (let i = 0; i < 8; i++) {
      const streamed = request(receiver.url, {
        method: 'POST',
        dispatcher: trustingDevCa,
        headers: { 'content-type': 'application/json', 'webhook-id': `msg_stream_${i}`, 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': 'v1,x' },
        body: Readable.from((function* () {
          for (let chunk = 0; chunk < 160; chunk += 1) yield Buffer.alloc(64 * 1024, 0x20);
        })()),
      });
      answers.push(await streamed.then(async (answer) => ({ status: answer.statusCode, answer: await answer.body.json() })).catch((error: Error) => (error.cause as { code?: string } | undefined)?.code ?? error.message));
    }
    expect(answers).toEqual(Array.from({ length: 16 }, () => ({ status: 413, answer: { status: 'body_too_large' } })));
    // A sender that writes the whole body before it reads (Python's http.client) must read the 413 too.
    const python = await runPythonAsync(
      [
        'import http.client, ssl, sys, json',
        'url = sys.argv[1]; host, port = url.split("//")[1].split("/")[0].split(":")',
        'context = ssl.create_default_context(cafile=sys.argv[2])',
        'body = b"{\\"pad\\": \\"" + b"x" * (10 << 20) + b"\\"}"',
        'seen = []',
        'for i in range(8):',
        '    connection = http.client.HTTPSConnection(host, int(port), context=context)',
        '    try:',
        '        connection.request("POST", "/", body=body, headers={"content-type": "application/json", "webhook-id": f"msg_py_{i}"})',
        '        seen.append(connection.getresponse().status)',
        '    except Exception as error:',
        '        seen.append(type(error).__name__)',
        '    connection.close()',
        'print(json.dumps(seen))',
      ].join('\n'),
      [receiver.url, DEV_CA_FILE],
    );
    expect(python.stderr).toBe('');
    expect(JSON.parse(python.stdout)).toEqual(Array.from({ length: 8 }, () => 413));
  });

  it('answers 415 unless the body is application/json', async () => {
    const { receiver, events } = await receiverWith();
    expect(await deliverWithAnswer(receiver, { id: 'msg_form', body: body(), contentType: 'application/x-www-form-urlencoded' })).toEqual({ status: 415, answer: { status: 'unsupported_media_type' } });
    expect(await deliver(receiver, { id: 'msg_text', body: body(), contentType: 'text/plain' })).toBe(415);
    expect(await deliver(receiver, { id: 'msg_seq', body: body(), contentType: 'application/json-seq' })).toBe(415);
    expect(await deliver(receiver, { id: 'msg_charset', body: body(), contentType: 'application/json; charset=utf-8' })).toBe(202);
    await waitFor(() => (events.length === 1 ? true : undefined));
    expect(events[0]!.id).toBe('msg_charset');
  });

  it('drops a replayed webhook-id, also after a restart', async () => {
    const journalFile = join(mkdtempSync(join(tmpdir(), 'receiver-')), 'journal.jsonl');
    const first = await receiverWith({ journalFile });
    expect(await deliver(first.receiver, { id: 'msg_once', body: body() })).toBe(202);
    expect(await deliver(first.receiver, { id: 'msg_once', body: body() })).toBe(200);
    await waitFor(() => (first.events.length === 1 ? true : undefined));
    await first.receiver.close();
    cleanups.length = 0;
    const second = await receiverWith({ journalFile });
    expect(await deliver(second.receiver, { id: 'msg_once', body: body() })).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(second.events).toEqual([]);
  });

  it('an event whose handler failed is handed over again after a restart', async () => {
    const journalFile = join(mkdtempSync(join(tmpdir(), 'receiver-')), 'journal.jsonl');
    const first = await receiverWith({ journalFile, onEvent: () => { throw new Error('handler down'); } });
    expect(await deliver(first.receiver, { id: 'msg_retry', body: body() })).toBe(202);
    await waitFor(() => (first.lines.some((line) => line.includes('webhook handler failed')) ? true : undefined));
    await first.receiver.close();
    cleanups.length = 0;
    const second = await receiverWith({ journalFile });
    await waitFor(() => (second.events.length === 1 ? true : undefined));
    expect(second.events[0]!.id).toBe('msg_retry');
  });

  it('a job pull end to end, woken by a real job.completed delivery instead of polling', async () => {
    const emulator = await startTestEmulator({ webhookCa: devCa(), jobStepMs: 50 });
    cleanups.push(() => emulator.close());
    const client = clientFor(emulator);
    cleanups.push(() => client.close());
    const completions = new JobCompletions();
    const secrets: string[] = [];
    const { receiver } = await receiverWith({
      secrets: () => secrets,
      onEvent: (event) => {
        if (event.type === 'job.completed') completions.notify(String(event.data.job_id));
      },
    });
    secrets.push((await client.createWebhook(receiver.url, ['job.completed'])).secret);

    const query = (await emulator.catalog()).tiktok.queries[2]!;
    const { job } = await client.startJob('tiktok', 'search', { query, limit: 700 });
    // Polling would not look a second time for an hour, longer than this test may take: only the
    // webhook can finish the wait.
    const done = await client.waitForJob(job.job_id, { completions, pollMinMs: 3_600_000, pollMaxMs: 3_600_000, timeoutMs: 7_200_000 });
    expect(done).toMatchObject({ status: 'completed', item_count: 700, credits_charged: 700 * 4 });
    const ids: string[] = [];
    for await (const page of client.jobResults(job.job_id, { pageSize: 300 })) ids.push(...page.items.map((item) => String(item.id)));
    expect(ids).toHaveLength(700);
    expect(new Set(ids).size).toBe(700);
    const ledger = await emulator.ledger();
    expect(ledger).toEqual([expect.objectContaining({ job_id: job.job_id, units: 700, credits: 2800 })]);
  });

  it('without a webhook, waiting polls with backoff until the job is done', async () => {
    const emulator = await startTestEmulator({ jobStepMs: 200 });
    cleanups.push(() => emulator.close());
    const client = clientFor(emulator);
    cleanups.push(() => client.close());
    const handle = (await emulator.catalog()).instagram.handles[0]!;
    const { job } = await client.startJob('instagram', 'channel-posts', { handle, limit: 120 });
    expect(job.status).toBe('queued');
    const done = await client.waitForJob(job.job_id, { pollMinMs: 20, pollMaxMs: 100 });
    expect(done).toMatchObject({ status: 'completed', item_count: 120, credits_charged: 240 });
  });
});
