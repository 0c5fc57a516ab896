/**
 * A disk that fills in the middle of a target's work (issue 32, found by the chaos soak's
 * disk-full fault: 22 to 29 calls charged and lost, 9 in flight): the first answer the store cannot
 * take fails the attempt, and the calls still queued in it (the enrichment of the pages being
 * enriched) are not sent, each to be charged and lost the same way.
 *
 * The work runs in a child process whose data directory is a small tmpfs, mounted in a private
 * mount namespace of its own (`unshare --mount`: the host's mounts are untouched; root only, as the
 * fault matrix's disk-full case), with the real store and the emulator over HTTP; Temporal's
 * activity context is mocked. The child reads what it landed itself: its tmpfs goes with it.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/project-paths.js';
import { built } from '../support/limited-child.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';

const API_KEY = 'sk_live_full_disk_calls';
/** The run's enrichment calls in flight in the worker (its `calls`), and each target's page being listed. */
const CALLS = 6;
const IN_FLIGHT = CALLS + 3;
const testing = JSON.stringify(createRequire(join(PROJECT_ROOT, 'package.json')).resolve('@temporalio/testing'));

let emulator: TestEmulator;
const dirs: string[] = [];
beforeAll(async () => {
  emulator = await startTestEmulator({ apiKeys: [API_KEY], latencyMs: 20 });
});
afterAll(async () => {
  await emulator.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Whether this process may make a mount namespace of its own and mount a tmpfs in it. */
const canMount = spawnSync('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', 'mount -t tmpfs -o size=64k tmpfs /mnt'], { stdio: 'ignore' }).status === 0;

/** Runs the script with `dataDir` a tmpfs of `kib` KiB in a mount namespace of its own; its last line as JSON. */
function runOnSmallDisk(dataDir: string, kib: number, body: string): Promise<{ errors: string[]; landed: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'full-disk-child-'));
  dirs.push(dir);
  const script = join(dir, 'child.mjs');
  writeFileSync(script, body);
  return new Promise((resolve, reject) => {
    const child = spawn('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', 'mount -t tmpfs -o "size=$1k" tmpfs "$2" && exec "$3" "$4"', 'sh', String(kib), dataDir, process.execPath, script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('close', (code) => {
      const last = stdout.trim().split('\n').at(-1);
      if (code !== 0 || !last?.startsWith('{')) reject(new Error(`the child failed (exit ${code}): ${stderr}`));
      else resolve(JSON.parse(last) as { errors: string[]; landed: string[] });
    });
  });
}

describe('a disk that fills during a target\'s work', () => {
  it.skipIf(!canMount)('fails the attempt at the first answer it cannot land, and sends none of the calls queued after it', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'full-disk-calls-'));
    dirs.push(dataDir);
    const handles = (await emulator.catalog()).tiktok.handles;
    const runId = `run-full-disk-${Date.now().toString(36)}`;
    // Three targets' works of one run in one worker, as a run's: their enrichment calls share the run's limit.
    const inputs = [4, 5, 6].map((index) => ({
      runId,
      harvest: 'full-disk',
      target: { key: `channel:tiktok:${handles[index]}:videos`, kind: 'channel', platform: 'tiktok', endpoint: 'channel-videos', params: { handle: handles[index] }, maxItems: 300, enrich: true },
      workId: `w${index}:full-disk`,
      grant: 100_000,
      enrich: { stats: true, comments: false, transcript: false, summary: false, download: false },
      pageSize: 20,
      calls: CALLS,
      from: { page: 1, items: 0, offset: 0, relists: 0 },
      stopAtIds: [],
    }));
    const outcome = await runOnSmallDisk(
      dataDir,
      4096,
      `const { MockActivityEnvironment } = await import(${testing});
const { targetWorkActivities } = await import(${built('activities/target-work')});
const { LocalStore } = await import(${built('src/store/store')});
const { SocialApiClient } = await import(${built('src/api/client')});
const { loadPriceTable } = await import(${built('src/config/prices')});
const { framesIn, parseSegmentHeader } = await import(${built('src/store/segment')});
const { segmentRoot } = await import(${built('src/store/layout')});
const { readdirSync, readFileSync } = await import('node:fs');
const { join } = await import('node:path');
const prices = loadPriceTable();
const client = new SocialApiClient({ baseUrl: ${JSON.stringify(emulator.baseUrl)}, apiKey: ${JSON.stringify(API_KEY)}, prices });
const store = new LocalStore(${JSON.stringify(dataDir)});
const { execFileSync } = await import('node:child_process');
const { statfsSync } = await import('node:fs');
const { harvestTarget } = targetWorkActivities({ client, store });
const works = ${JSON.stringify(inputs)}.map((input) => new MockActivityEnvironment({ attempt: 1 }).run(harvestTarget, { ...input, prices }));
// Another file fills the disk once 60 calls are charged, leaving it a few KiB (as the chaos soak's disk-full fault).
for (;;) {
  const ledger = await (await fetch(${JSON.stringify(`${emulator.origin}/_emulator/ledger?api_key=${API_KEY}`)})).json();
  if (ledger.data.length >= 60) break;
  await new Promise((resolve) => setTimeout(resolve, 20));
}
const fs = statfsSync(${JSON.stringify(dataDir)});
execFileSync('fallocate', ['-l', String(fs.bavail * fs.bsize - 16 * 1024), join(${JSON.stringify(dataDir)}, 'filler')]);
const settled = await Promise.allSettled(works);
const outcome = { errors: settled.map((result) => (result.status === 'rejected' ? result.reason.message : 'done')) };
await client.close();
// The request ids of every answer landed, from the frames of the run's segments.
const landed = [];
const root = join(segmentRoot(${JSON.stringify(dataDir)}), readdirSync(segmentRoot(${JSON.stringify(dataDir)}))[0]);
for (const name of readdirSync(root)) {
  const bytes = readFileSync(join(root, name));
  const header = parseSegmentHeader(bytes);
  if (!header) continue;
  for (const frame of framesIn(bytes.subarray(header.framesStart), header.framesStart).frames) {
    landed.push(JSON.parse(bytes.subarray(frame.textOffset, frame.textOffset + frame.textLength).toString('utf8')).request_id);
  }
}
console.log(JSON.stringify({ ...outcome, landed }));
process.exit(0);`,
    );
    // The disk filled before the work's end: the attempt failed on it.
    expect(outcome.errors).toEqual([expect.stringMatching(/ENOSPC/), expect.stringMatching(/ENOSPC/), expect.stringMatching(/ENOSPC/)]);
    const landed = new Set(outcome.landed);
    const ledger = await emulator.ledger(API_KEY);
    expect(landed.size).toBeGreaterThan(0);
    // Charged and not landed: at most the calls that were in flight when the disk filled.
    const lost = ledger.filter((row) => !landed.has(row.request_id));
    expect(lost.length).toBeLessThanOrEqual(IN_FLIGHT);
  }, 60_000);
});
