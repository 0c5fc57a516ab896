import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SocialApiClient } from '../../src/api/client.js';
import { ResponseValidationError, SocialApiError } from '../../src/api/errors.js';
import { startCorruptingProxy, type Corruption, type CorruptingProxy } from '../../src/emulator/corrupting-proxy.js';
import { prices } from '../support/client.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';

let emulator: TestEmulator;
let proxy: CorruptingProxy;
let client: SocialApiClient;
let catalog: Awaited<ReturnType<TestEmulator['catalog']>>;
/** What the proxy does to the next content call's answer; reset after each use. */
let next: Corruption | undefined;

beforeAll(async () => {
  emulator = await startTestEmulator();
  catalog = await emulator.catalog();
  proxy = await startCorruptingProxy({
    upstream: new URL(emulator.baseUrl).origin,
    choose: () => {
      const corruption = next;
      next = undefined;
      return corruption;
    },
  });
  client = new SocialApiClient({ baseUrl: proxy.baseUrl, apiKey: emulator.apiKey, prices, retry: { minDelayMs: 5, maxDelayMs: 20, maxElapsedMs: 20_000 } });
});

afterAll(async () => {
  await client.close();
  await proxy.close();
  await emulator.close();
});

async function ledgerCredits(): Promise<number> {
  return (await emulator.ledger()).reduce((sum, row) => sum + row.credits, 0);
}

async function refusal(call: Promise<unknown>): Promise<ResponseValidationError> {
  const error = await call.then(
    () => undefined,
    (failure: unknown) => failure,
  );
  expect(error).toBeInstanceOf(ResponseValidationError);
  return error as ResponseValidationError;
}

describe('answers are checked against what was asked before anyone may use them', () => {
  it('a page with more items than the limit is refused, with its request id and the charge the API reported', async () => {
    const before = await ledgerCredits();
    next = { kind: 'oversize' };
    const error = await refusal(client.page('tiktok', 'channel-videos', { handle: catalog.tiktok.handles[0]!, limit: 10 }));
    expect(error.message).toMatch(/tiktok\/channel-videos: the page holds 20 items, more than the limit of 10 asked for \(request req_/);
    expect(error.requestId).toMatch(/^req_/);
    // The API charged the 10 items it served: the refusal says so, so the charge can be counted.
    expect(error.creditsCharged).toBe(10 * prices['tiktok/channel-videos']);
    expect((await ledgerCredits()) - before).toBe(error.creditsCharged);
  });

  it('an item with an empty id is refused', async () => {
    next = { kind: 'empty_id' };
    const error = await refusal(client.page('tiktok', 'search', { query: catalog.tiktok.queries[0]!, limit: 5 }));
    expect(error.message).toMatch(/tiktok\/search: item 0 has an empty id/);
  });

  it('stats about another item, and a profile of another account, are refused', async () => {
    const page = await client.page('tiktok', 'channel-videos', { handle: catalog.tiktok.handles[1]!, limit: 1 });
    const url = page.items[0]!.url;
    next = { kind: 'other_entity' };
    const stats = await refusal(client.get('tiktok', 'stats', { url }));
    expect(stats.message).toMatch(/tiktok\/stats: the answer is about item "\d+", not "\d+" as asked/);
    next = { kind: 'other_entity' };
    const profile = await refusal(client.get('instagram', 'channel-stats', { handle: catalog.instagram.handles[0]! }));
    expect(profile.message).toContain(`the answer is about account "${catalog.instagram.handles[0]!}0", not "${catalog.instagram.handles[0]!}" as asked`);
    // The same calls, unspoiled, pass.
    expect((await client.get('tiktok', 'stats', { url })).data.url).toBe(url);
  });
});

describe('attempts whose answers are lost', () => {
  it('a cut body is sent again, and the caller is told first, so the charged attempt can be journaled', async () => {
    const before = (await emulator.ledger()).length;
    next = { kind: 'cut_body' };
    const repeats: string[] = [];
    const result = await client.get('tiktok', 'channel-stats', { handle: catalog.tiktok.handles[2]! }, { beforeRepeat: (lost) => void repeats.push(lost.code) });
    expect(result.data.handle).toBe(catalog.tiktok.handles[2]!);
    expect(repeats).toEqual(['network_error']);
    // Both attempts reached the API and were charged.
    expect((await emulator.ledger()).length - before).toBe(2);
  });

  it('an answer refused with an error status is sent again without telling: it was never charged', async () => {
    await emulator.admin('faults', { fault_rate: 1 });
    const repeats: string[] = [];
    const failing = client.get('tiktok', 'channel-stats', { handle: catalog.tiktok.handles[2]! }, { beforeRepeat: (lost) => void repeats.push(lost.code) });
    await expect(failing).rejects.toMatchObject({ name: 'ServerError' });
    await emulator.admin('faults', { fault_rate: 0 });
    expect(repeats).toEqual([]);
  });

  it('a slow drip is cut off at the call deadline, however steadily the bytes come', async () => {
    next = { kind: 'slow_drip', bytes: 8, everyMs: 100 };
    // The drip would end with a whole answer, were the call not cut: its deadline error is the outcome
    // to check (how long it took is the machine's load too).
    const error = await client.get('tiktok', 'channel-stats', { handle: catalog.tiktok.handles[3]! }, { deadlineMs: 1_500 }).then(
      () => undefined,
      (failure: unknown) => failure,
    );
    expect(error).toBeInstanceOf(SocialApiError);
    expect((error as SocialApiError).code).toBe('call_deadline');
    expect((error as SocialApiError).message).toContain('within the call\'s deadline of 1500 ms');
  });

  it('a deadline reached by retrying 5xx answers names them: their status codes and request ids', async () => {
    // Every answer a 5xx, each held a while: the client retries until the deadline ends the call.
    const patient = new SocialApiClient({ baseUrl: emulator.baseUrl, apiKey: emulator.apiKey, prices, retry: { maxAttempts: 1_000, minDelayMs: 5, maxDelayMs: 20, maxElapsedMs: 60_000 } });
    await emulator.admin('faults', { fault_rate: 1, latency_ms: 200 });
    try {
      const error = await patient.get('tiktok', 'channel-stats', { handle: catalog.tiktok.handles[4]! }, { deadlineMs: 1_500 }).then(
        () => undefined,
        (failure: unknown) => failure as SocialApiError,
      );
      expect(error).toMatchObject({ name: 'CallDeadlineError', code: 'call_deadline' });
      expect(error!.message).toMatch(/within the call's deadline of 1500 ms; before it, \d+ attempts? ended in 5\d\d \(request \S+\)/);
      const named = [...error!.message.matchAll(/(5\d\d) \(request (\S+)\)/g)];
      expect(named.length).toBeGreaterThan(0);
      for (const [, , requestId] of named) expect(requestId).toMatch(/^req_/);
    } finally {
      await emulator.admin('faults', { fault_rate: 0, latency_ms: 0 });
      await patient.close();
    }
  });

  it('headers held past the deadline end the call too, and no attempt starts after it', async () => {
    next = { kind: 'slow_headers', ms: 3_000 };
    const repeats: string[] = [];
    // Held 3 s, the answer would come whole: the deadline's error, and no attempt after it, are the outcome.
    await expect(client.get('tiktok', 'channel-stats', { handle: catalog.tiktok.handles[3]! }, { deadlineMs: 1_000, beforeRepeat: (lost) => void repeats.push(lost.code) })).rejects.toMatchObject({ code: 'call_deadline' });
    expect(repeats).toEqual([]);
  });
});
