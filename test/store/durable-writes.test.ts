import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, utimesSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { SocialApiClient } from '../../src/api/client.js';
import { removeStrayTemporaries, writeDurableFile, type WriteFunction } from '../../src/store/durable-file.js';
import type { PageLanding } from '../../src/store/landing.js';
import { listRunSegments, pageLandingKey, runFolderOfRun } from '../../src/store/layout.js';
import { LocalStore } from '../../src/store/store.js';
import { readCoverage, writeCoverage } from '../../src/store/listing-coverage.js';
import { findJob, registerJob } from '../../src/store/job-registry.js';
import { EventJournal } from '../../src/store/event-journal.js';
import { readSecrets, writeSecrets } from '../../src/store/secret-store.js';
import { startTestWorker } from '../support/temporal.js';
import { built, runWithFileSizeLimit } from '../support/limited-child.js';

function page(page: number, items: number): PageLanding {
  return {
    format: 1,
    kind: 'page',
    run_id: 'run-1',
    harvest: 'h',
    target: 'channel:tiktok:someone:videos',
    page,
    endpoint: 'tiktok/channel-videos',
    params: { handle: 'someone' },
    request_id: `req-${page}`,
    observed_at: '2026-01-01T00:00:00.000Z',
    data: Array.from({ length: items }, (_, i) => ({ id: `v${i}`, title: 'x'.repeat(200) })),
  };
}

/** Every file under a directory, by path relative to it. */
function filesUnder(directory: string): string[] {
  if (!existsSync(directory)) return [];
  return readdirSync(directory, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name).slice(directory.length + 1))
    .sort();
}

/** A child's script that lands `landing` through the store and makes its run durable: prints its key, or the error. */
function landedInChild(dataDir: string, landing: PageLanding): string {
  return `import { LocalStore } from ${built('src/store/store')};
const store = new LocalStore(${JSON.stringify(dataDir)});
try {
  const key = await store.writeLanding(${JSON.stringify(landing)});
  await store.makeRunDurable(${JSON.stringify(landing.run_id)});
  console.log(JSON.stringify({ ok: key }));
} catch (error) {
  console.log(JSON.stringify({ message: error.message, code: error.code }));
}
await store.close();`;
}

/** A write system call that stores at most `most` bytes each time. */
function storingAtMost(most: number, calls: number[] = []): WriteFunction {
  return (fd, buffer, offset, length) => {
    const stored = Math.min(most, length);
    calls.push(stored);
    return writeSync(fd, buffer, offset, stored);
  };
}

describe('durable file writes', () => {
  it('go on after short writes until every byte is stored', () => {
    const dir = mkdtempSync(join(tmpdir(), 'durable-'));
    const file = join(dir, 'a', 'b.json');
    const text = JSON.stringify({ data: 'é'.repeat(5000) });
    const calls: number[] = [];
    writeDurableFile(file, text, { what: 'test file', write: storingAtMost(777, calls) });
    expect(readFileSync(file, 'utf8')).toBe(text);
    expect(calls.length).toBe(Math.ceil(Buffer.byteLength(text) / 777));
    expect(filesUnder(dir)).toEqual(['a/b.json']);
  });

  it('take a write that stores nothing for a full disk: an error naming the file, and no temporary left', () => {
    const dir = mkdtempSync(join(tmpdir(), 'durable-'));
    const file = join(dir, 'b.json');
    writeFileSync(file, 'the previous version');
    let calls = 0;
    const error = (() => {
      try {
        writeDurableFile(file, 'x'.repeat(10_000), { what: 'test file', write: (_fd, _buffer, _offset, length) => (++calls === 1 ? Math.min(length, 4096) : 0) });
      } catch (caught) {
        return caught as NodeJS.ErrnoException;
      }
      throw new Error('no error');
    })();
    expect(error.message).toMatch(new RegExp(`^cannot write test file ${file}: ENOSPC: `));
    expect(error.code).toBe('ENOSPC');
    expect(error.path).toBe(file);
    expect(readFileSync(file, 'utf8')).toBe('the previous version');
    expect(filesUnder(dir)).toEqual(['b.json']);
  });

  it("keep the cause's code, and the cause itself, when a write fails", () => {
    const dir = mkdtempSync(join(tmpdir(), 'durable-'));
    const file = join(dir, 'c.json');
    const cause = Object.assign(new Error('EDQUOT: disk quota exceeded, write'), { code: 'EDQUOT', errno: -122, syscall: 'write' });
    let error: (Error & { code?: string; syscall?: string }) | undefined;
    try {
      writeDurableFile(file, 'x'.repeat(100), {
        what: 'test file',
        write: () => {
          throw cause;
        },
      });
    } catch (caught) {
      error = caught as Error;
    }
    expect(error?.message).toBe(`cannot write test file ${file}: EDQUOT: disk quota exceeded, write`);
    expect(error?.code).toBe('EDQUOT');
    expect(error?.syscall).toBe('write');
    expect(error?.cause).toBe(cause);
    expect(filesUnder(dir)).toEqual([]);
  });

  it('refuse a landing bigger than a file may grow (short write, then EFBIG): an error naming the segment, nothing found under its key', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'durable-'));
    const landing = page(1, 100);
    const key = pageLandingKey(landing.run_id, landing.target, landing.page);
    const result = runWithFileSizeLimit<{ ok?: string; message?: string; code?: string }>(12, landedInChild(dataDir, landing));
    expect(JSON.stringify(landing).length).toBeGreaterThan(12 * 1024 + 8000);
    expect(result.ok).toBeUndefined();
    const [segment] = await listRunSegments(dataDir, runFolderOfRun(landing.run_id));
    expect(result.message).toBe(`cannot write landing segment ${segment!.file}: EFBIG: file too large, write`);
    expect(result.code).toBe('EFBIG');
    expect(await new LocalStore(dataDir).findLanding(key)).toBeUndefined();
    expect(filesUnder(dataDir).filter((file) => file.endsWith('.tmp'))).toEqual([]);
  });

  it('land a page under the same limit when it fits, whole', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'durable-'));
    const landing = page(2, 10);
    const result = runWithFileSizeLimit<{ ok?: string; message?: string }>(12, landedInChild(dataDir, landing));
    expect(result.ok).toBe(pageLandingKey(landing.run_id, landing.target, 2));
    expect(await new LocalStore(dataDir).findLanding(result.ok!)).toEqual(landing);
  });

  it('are what every writer uses: coverage, job records and the secret store are replaced whole; a landing landed again keeps its key', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'durable-'));
    const landings = new LocalStore(dataDir);
    const key = await landings.writeLanding(page(3, 5));
    expect(await landings.writeLanding(page(3, 5))).toBe(key);
    await landings.makeRunDurable('run-1');
    expect(await landings.findLanding(key)).toEqual(page(3, 5));
    writeCoverage(dataDir, 'channel:tiktok:x:videos', { complete: true, max_items: 10, run_id: 'r', at: 'now' });
    expect(readCoverage(dataDir, 'channel:tiktok:x:videos')?.complete).toBe(true);
    registerJob(dataDir, { jobId: 'job-1', requestId: 'req', workflowId: 'wf', runId: 'r', target: 't' });
    expect(findJob(dataDir, 'job-1')?.workflowId).toBe('wf');
    const store = join(dataDir, 'webhooks', 'secrets.json');
    writeSecrets(store, [{ webhook_id: 'w', url: 'https://x', secret: 's' }]);
    expect(readSecrets(store)).toEqual([{ webhook_id: 'w', url: 'https://x', secret: 's' }]);
    expect(statSync(store).mode & 0o777).toBe(0o600);
    expect(filesUnder(dataDir).filter((file) => file.endsWith('.tmp'))).toEqual([]);
  });
});

/** A child that dies (SIGKILL) in the middle of writing a landing, leaving its temporary. */
async function writerKilledMidWrite(dataDir: string): Promise<void> {
  const script = join(mkdtempSync(join(tmpdir(), 'killed-')), 'child.mjs');
  writeFileSync(
    script,
    `import { writeDurableFile } from ${built('src/store/durable-file')};
writeDurableFile(${JSON.stringify(join(dataDir, 'landing', 'run-1', 'target', 'page-000001.json'))}, 'x'.repeat(100), { what: 'landing', write: () => process.kill(process.pid, 'SIGKILL') });`,
  );
  await new Promise<void>((resolve) => spawn(process.execPath, [script], { stdio: 'ignore' }).once('exit', () => resolve()));
}

/** A child stopped in the middle of writing a landing, until it is killed. */
async function writerStalledMidWrite(dataDir: string) {
  const script = join(mkdtempSync(join(tmpdir(), 'stalled-')), 'child.mjs');
  writeFileSync(
    script,
    `import { writeSync } from 'node:fs';
import { writeDurableFile } from ${built('src/store/durable-file')};
writeDurableFile(${JSON.stringify(join(dataDir, 'landing', 'run-1', 'target', 'page-000002.json'))}, 'x'.repeat(100), { what: 'landing', write: (fd, buffer, offset, length) => {
  writeSync(1, 'writing\\n');
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60_000);
  return writeSync(fd, buffer, offset, length);
} });`,
  );
  const child = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
  return {
    async kill() {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

describe('stray temporaries', () => {
  it("are removed when their writer is gone, or when they are old and their writer cannot be told; a live writer's is kept", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'stray-'));
    await writerKilledMidWrite(dataDir);
    const stalled = await writerStalledMidWrite(dataDir);
    const targetDir = join(dataDir, 'landing', 'run-1', 'target');
    const [dead, live] = readdirSync(targetDir).sort();
    expect(dead).toMatch(/^\.page-000001\.json\.\d+-[0-9a-z]+-[0-9a-f]+\.tmp$/);
    expect(live).toMatch(/^\.page-000002\.json\.\d+-[0-9a-z]+-[0-9a-f]+\.tmp$/);
    // Earlier versions' temporaries name no process: removed once old.
    const hourAgo = new Date(Date.now() - 3_600_000);
    writeFileSync(join(targetDir, '.0123456789ab.tmp'), 'x');
    writeFileSync(join(targetDir, '.ba9876543210.tmp'), 'x');
    utimesSync(join(targetDir, '.ba9876543210.tmp'), hourAgo, hourAgo);
    mkdirSync(join(dataDir, 'coverage'));
    writeFileSync(join(dataDir, 'coverage', 'x.json.tmp'), '{}');
    utimesSync(join(dataDir, 'coverage', 'x.json.tmp'), hourAgo, hourAgo);
    writeFileSync(join(targetDir, 'page-000003.json'), '{}');
    // Not a folder the harvester writes through temporaries: DuckDB's spill files stay.
    mkdirSync(join(dataDir, 'warehouse.duckdb.tmp'));
    writeFileSync(join(dataDir, 'warehouse.duckdb.tmp', 'duckdb_temp_storage-0.tmp'), '');
    utimesSync(join(dataDir, 'warehouse.duckdb.tmp', 'duckdb_temp_storage-0.tmp'), hourAgo, hourAgo);

    const removed = removeStrayTemporaries(dataDir);
    expect(removed.sort()).toEqual([join(dataDir, 'coverage', 'x.json.tmp'), join(targetDir, '.ba9876543210.tmp'), join(targetDir, dead!)].sort());
    expect(readdirSync(targetDir).sort()).toEqual(['.0123456789ab.tmp', live, 'page-000003.json'].sort());
    expect(existsSync(join(dataDir, 'warehouse.duckdb.tmp', 'duckdb_temp_storage-0.tmp'))).toBe(true);

    await stalled.kill();
    expect(removeStrayTemporaries(dataDir)).toEqual([join(targetDir, live!)]);
    expect(readdirSync(targetDir).sort()).toEqual(['.0123456789ab.tmp', 'page-000003.json']);
  });

  it('are removed when a worker starts', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'stray-'));
    await writerKilledMidWrite(dataDir);
    const targetDir = join(dataDir, 'landing', 'run-1', 'target');
    expect(readdirSync(targetDir)).toHaveLength(1);
    const worker = await startTestWorker({} as SocialApiClient, { dataDir });
    await worker.stop();
    expect(readdirSync(targetDir)).toEqual([]);
  });
});

describe('the webhook event journal', () => {
  it('cuts off an append that failed part-way, so the next delivery is recorded on a line of its own and the journal opens again', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'events-')), 'webhooks', 'journal.jsonl');
    const payload = (size: number) => ({ type: 'job.completed', timestamp: '2026-01-01T00:00:00Z', data: { job_id: 'j', note: 'x'.repeat(size) } });
    const result = runWithFileSizeLimit<{ message?: string; code?: string; seenAfterFailure: boolean }>(
      2,
      `import { EventJournal } from ${built('src/store/event-journal')};
const journal = await EventJournal.open(${JSON.stringify(path)});
await journal.accept('first', ${JSON.stringify(payload(100))});
let message, code;
try {
  await journal.accept('big', ${JSON.stringify(payload(3000))});
} catch (error) {
  message = error.message;
  code = error.code;
}
const seenAfterFailure = journal.seenIds.has('big');
await journal.accept('second', ${JSON.stringify(payload(100))});
await journal.close();
console.log(JSON.stringify({ message, code, seenAfterFailure }));`,
    );
    expect(result.message).toBe(`cannot write webhook event journal ${path}: EFBIG: file too large, write`);
    expect(result.code).toBe('EFBIG');
    // Not recorded, so the sender's retry is not taken for a duplicate.
    expect(result.seenAfterFailure).toBe(false);
    const reopened = await EventJournal.open(path);
    expect([...reopened.seenIds].sort()).toEqual(['first', 'second']);
    expect([...reopened.unhandled.keys()].sort()).toEqual(['first', 'second']);
    await reopened.close();
  });
});
