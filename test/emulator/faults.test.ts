import { afterEach, describe, expect, it } from 'vitest';
import { q, startTestEmulator, type TestEmulator } from '../support/emulator.js';

let emulator: TestEmulator | undefined;
afterEach(async () => {
  await emulator?.close();
  emulator = undefined;
});

describe('fault injection', () => {
  it('--fault-rate answers that fraction with 500, 502 or 503 and charges none of them', async () => {
    emulator = await startTestEmulator({ faultRate: 0.3 });
    const handle = (await emulator.catalog()).tiktok.handles[0]!;
    const statuses: number[] = [];
    let okCharges = 0;
    for (let i = 0; i < 200; i++) {
      const result = await emulator.call(`/tiktok/channel-stats?handle=${handle}`);
      statuses.push(result.status);
      if (result.status === 200) okCharges += Number(result.headers['x-credits-charged']);
      else expect(result.headers['x-credits-charged']).toBe('0');
    }
    const faults = statuses.filter((status) => status !== 200);
    expect(new Set(faults)).toEqual(new Set([500, 502, 503]));
    // 200 draws at 0.3: 60 expected; 35..85 is more than 4 standard deviations either way.
    expect(faults.length).toBeGreaterThan(35);
    expect(faults.length).toBeLessThan(85);
    const charged = (await emulator.ledger()).reduce((sum, row) => sum + row.credits, 0);
    expect(charged).toBe(okCharges);
    expect(charged).toBe((200 - faults.length) * 3);
  });

  it('faults, rate limit and latency change at run time through POST /_emulator/faults', async () => {
    emulator = await startTestEmulator();
    const handle = (await emulator.catalog()).tiktok.handles[0]!;
    const set = await emulator.admin<{ data: { fault_rate: number; latency_ms: number } }>('faults', { fault_rate: 1, latency_ms: 150 });
    expect(set.json.data).toMatchObject({ fault_rate: 1, latency_ms: 150 });
    const started = Date.now();
    const failed = await emulator.call(`/tiktok/channel-stats?handle=${handle}`);
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    expect([500, 502, 503]).toContain(failed.status);
    await emulator.admin('faults', { fault_rate: 0, latency_ms: 0 });
    expect((await emulator.call(`/tiktok/channel-stats?handle=${handle}`)).status).toBe(200);
    const refused = await emulator.admin<{ error: { param: string } }>('faults', { fault_rate: 0.5, latency_ms: -1 });
    expect(refused.status).toBe(400);
    expect(refused.json.error.param).toBe('latency_ms');
    // A refused change changes nothing, not even its valid fields.
    expect((await emulator.admin<{ data: { fault_rate: number } }>('faults', {})).json.data.fault_rate).toBe(0);
  });
});

describe('rate limit', () => {
  it('a per-key token bucket answers 429 rate_limited with Retry-After, uncharged, and refills', async () => {
    emulator = await startTestEmulator({ rateLimit: 5 });
    const handle = (await emulator.catalog()).tiktok.handles[0]!;
    const results = await Promise.all(Array.from({ length: 8 }, () => emulator!.call<{ error?: { code: string } }>(`/tiktok/channel-stats?handle=${handle}`)));
    const limited = results.filter((result) => result.status === 429);
    expect(results.filter((result) => result.status === 200).length).toBe(5);
    expect(limited.length).toBe(3);
    for (const result of limited) {
      expect(result.json.error?.code).toBe('rate_limited');
      expect(Number(result.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(result.headers['x-credits-charged']).toBe('0');
      expect(result.headers['x-ratelimit-limit']).toBe('5');
      expect(result.headers['x-ratelimit-remaining']).toBe('0');
    }
    expect((await emulator.ledger()).length).toBe(5);
    // Another key has its own bucket.
    await emulator.admin('keys', { api_key: 'sk_live_other_team', credits: 100 });
    expect((await emulator.call(`/tiktok/channel-stats?handle=${handle}`, { apiKey: 'sk_live_other_team' })).status).toBe(200);
    // The bucket refills 5 tokens a second: one is back after 200 ms (on the wall clock, which the
    // emulated clock does not move: src/emulator/server.ts).
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await emulator.call(`/tiktok/stats?url=${q('https://www.tiktok.com/@x/video/7301234567890123456')}`)).status).toBe(404);
  });
});
