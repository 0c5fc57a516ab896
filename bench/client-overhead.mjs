#!/usr/bin/env node
/**
 * The client's overhead: the same endpoint (a cached tiktok/stats call) called N times in a row,
 * once through SocialApiClient (validation, typed errors, retries, credit checks) and once through
 * a bare undici Pool loop that only parses the JSON, against one emulator process. The client may
 * be at most 10% slower. The paths take turns in blocks of 50 calls, so drift on the machine hits both alike.
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
/** Runs `calls` calls in a row and returns the milliseconds they took. */
async function time(call, calls) {
  const started = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) await call();
  return Number(process.hrtime.bigint() - started) / 1e6;
}

await time(bare, CALLS);
await time(viaClient, CALLS); // warm both paths and the emulator's cache
// The two paths take turns in short blocks, so drift on this shared 2-core machine (the emulator's
// garbage collection, other processes, CPU frequency) hits both alike; a round is CALLS calls of each.
const BLOCK = 50;
const bareTimes = [];
const clientTimes = [];
for (let round = 0; round < ROUNDS; round++) {
  let bareMsInRound = 0;
  let clientMsInRound = 0;
  for (let block = 0; block < CALLS / BLOCK; block++) {
    // Which path goes first alternates, so neither always runs after the other's garbage.
    if (block % 2 === 0) {
      bareMsInRound += await time(bare, BLOCK);
      clientMsInRound += await time(viaClient, BLOCK);
    } else {
      clientMsInRound += await time(viaClient, BLOCK);
      bareMsInRound += await time(bare, BLOCK);
    }
  }
  bareTimes.push(bareMsInRound);
  clientTimes.push(clientMsInRound);
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
const perRound = clientTimes.map((clientRound, round) => (clientRound / bareTimes[round] - 1) * 100);
console.log(`overhead: ${overhead.toFixed(1)} % (target ≤ 10 %): ${overhead <= 10 ? 'PASS' : 'FAIL'}; per round: ${Math.min(...perRound).toFixed(1)} % to ${Math.max(...perRound).toFixed(1)} %`);
await client.close();
await pool.close();
emulator.kill('SIGTERM');
