#!/usr/bin/env node
/**
 * The client's overhead: the same endpoint (a cached tiktok/stats call) called N times in a row,
 * once through SocialApiClient (validation, typed errors, retries, credit checks) and once through
 * a bare undici Pool loop that only parses the JSON, against one emulator process. The client may
 * be at most 10% slower. Rounds alternate which path goes first, so drift on the machine hits both alike.
 *
 *   npm run build && node bench/client-overhead.mjs        (BENCH_CALLS=3000, BENCH_ROUNDS=5)
 */
import { Pool } from 'undici';
import { startEmulatorProcess } from './emulator-process.mjs';

const dist = new URL('../dist/', import.meta.url).pathname;
const { SocialApiClient } = await import(`${dist}src/api/client.js`);
const { loadPriceTable } = await import(`${dist}src/config/prices.js`);
const CALLS = Number(process.env.BENCH_CALLS ?? 3000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const KEY = 'sk_live_bench_client';

const { child: emulator, baseUrl, origin } = await startEmulatorProcess(['--rate-limit', '1000000000', '--credits', '1000000000000', '--api-key', KEY]);
const catalog = (await (await fetch(`${origin}/_emulator/catalog`)).json()).data;
const videos = await (await fetch(`${baseUrl}/tiktok/channel-videos?handle=${catalog.tiktok.handles[0]}&limit=1`, { headers: { authorization: `Bearer ${KEY}` } })).json();
const url = videos.data[0].url;

const client = new SocialApiClient({ baseUrl, apiKey: KEY, prices: loadPriceTable(), connections: 1 });
const pool = new Pool(origin, { connections: 1 });
const path = `/v1/tiktok/stats?url=${encodeURIComponent(url)}`;

async function bare() {
  const response = await pool.request({ method: 'GET', path, headers: { authorization: `Bearer ${KEY}` } });
  const body = await response.body.json();
  if (response.statusCode !== 200 || !body.data) throw new Error(`bare call failed: ${response.statusCode}`);
}
async function viaClient() {
  await client.get('tiktok', 'stats', { url });
}
async function time(call) {
  const started = process.hrtime.bigint();
  for (let i = 0; i < CALLS; i++) await call();
  return Number(process.hrtime.bigint() - started) / 1e6;
}

await time(bare);
await time(viaClient); // warm both paths and the emulator's cache
const bareTimes = [];
const clientTimes = [];
for (let round = 0; round < ROUNDS; round++) {
  // Which path goes first alternates, so neither always runs after the other's garbage.
  if (round % 2 === 0) {
    bareTimes.push(await time(bare));
    clientTimes.push(await time(viaClient));
  } else {
    clientTimes.push(await time(viaClient));
    bareTimes.push(await time(bare));
  }
}
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const bareMs = median(bareTimes);
const clientMs = median(clientTimes);
const overhead = (clientMs / bareMs - 1) * 100;
console.log(`${CALLS} sequential cached tiktok/stats calls per round, ${ROUNDS} rounds, medians:`);
console.log('| path | ms per round | calls/s | µs per call |');
console.log('|---|---|---|---|');
console.log(`| bare undici Pool + JSON.parse (baseline) | ${bareMs.toFixed(0)} | ${Math.round(CALLS / (bareMs / 1000))} | ${((bareMs * 1000) / CALLS).toFixed(0)} |`);
console.log(`| SocialApiClient.get | ${clientMs.toFixed(0)} | ${Math.round(CALLS / (clientMs / 1000))} | ${((clientMs * 1000) / CALLS).toFixed(0)} |`);
console.log(`overhead: ${overhead.toFixed(1)} % (target ≤ 10 %): ${overhead <= 10 ? 'PASS' : 'FAIL'}`);
await client.close();
await pool.close();
emulator.kill('SIGTERM');
