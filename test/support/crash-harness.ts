/**
 * Test support for the crash-consistency harness: `harvester worker` run under strace, watched as
 * its record grows, killed with its whole process tree at a crash point; what the emulator served
 * and when; and what the lake holds, read the way a user's query reads it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import diagnostics from 'node:diagnostics_channel';
import { appendFileSync, closeSync, existsSync, openSync, readdirSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { readFrameText, readSegment } from '../../src/store/segment.js';
import { withWarehouseQueries } from '../../src/warehouse/query.js';
import { CLI } from './cli.js';
import { straceArgs, TraceReader, type TraceCall } from './crash-disk.js';

/** A worker (or another harvester command) run under strace, in a process group of its own. */
export interface TracedProcess {
  /** strace's process. */
  strace: ChildProcess;
  /** The harvester's process (strace's child, the leader of its own process group). */
  pid(): number | undefined;
  reader: TraceReader;
  log: string;
  /** Resolves when strace has exited (its record is then whole). */
  exited: Promise<void>;
}

/**
 * Runs `harvester <args>` under strace (`setsid`: its own process group, so the crash kills it and
 * the load process it forks, never strace, whose record must be flushed whole). `inject` adds
 * strace `-e inject=` rules, e.g. `fdatasync:signal=KILL:when=1`: the process is killed on entering
 * that call, before it runs, with no delay a watcher would add.
 */
export function startTraced(args: string[], env: Record<string, string>, log: string, root: string, inject: string[] = []): TracedProcess {
  const injections = inject.flatMap((rule) => ['-e', `inject=${rule}`]);
  const strace = spawn('strace', [...injections, ...straceArgs(log, ['setsid', process.execPath, CLI, ...args])], {
    env: { ...process.env, ...env, LOG_LEVEL: 'error' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => strace.once('exit', () => resolve()));
  let pid: number | undefined;
  return {
    strace,
    pid: () => (pid ??= firstPidOf(log)),
    reader: new TraceReader(root),
    log,
    exited,
  };
}

/**
 * The traced process: the pid of the record's first line. (Not strace's first child in /proc:
 * strace forks short-lived children of its own at start to probe ptrace, and one of them was
 * taken for the worker once, so the crash killed nothing and waited for good.)
 */
function firstPidOf(log: string): number | undefined {
  if (!existsSync(log)) return undefined;
  const head = /^(\d+) /.exec(readFileText(log));
  return head ? Number(head[1]) : undefined;
}

function readFileText(path: string): string {
  const fd = openSync(path, 'r');
  try {
    const buffer = Buffer.alloc(4096);
    const n = readSync(fd, buffer, 0, buffer.length, 0);
    return buffer.subarray(0, n).toString();
  } finally {
    closeSync(fd);
  }
}

/** Reads what the record gained since the last call; gives the calls that completed in it. */
export function readNew(traced: TracedProcess, state: { offset: number }): TraceCall[] {
  if (!existsSync(traced.log)) return [];
  const size = statSync(traced.log).size;
  if (size <= state.offset) return [];
  const fd = openSync(traced.log, 'r');
  try {
    const buffer = Buffer.alloc(size - state.offset);
    const n = readSync(fd, buffer, 0, buffer.length, state.offset);
    state.offset += n;
    return traced.reader.feed(buffer.subarray(0, n).toString('latin1'));
  } finally {
    closeSync(fd);
  }
}

/**
 * Watches the record until `trigger` is true of a call (it sees every call in order, with all
 * before it in `traced.reader.calls`), then kills the harvester's process tree at once. Resolves
 * with the call that triggered, or undefined when the process ended first (e.g. an injected kill).
 */
export async function crashWhen(traced: TracedProcess, trigger: (call: TraceCall, earlier: TraceCall[]) => boolean, timeoutMs: number, what: string): Promise<TraceCall | undefined> {
  const state = { offset: 0 };
  const deadline = Date.now() + timeoutMs;
  let ended = false;
  void traced.exited.then(() => (ended = true));
  let lastNote = Date.now();
  for (let round = 0; ; round++) {
    if (round < 3) debugNote(`crash point ${what}: round ${round}, offset ${state.offset}`);
    const calls = readNew(traced, state);
    if (round < 3) debugNote(`crash point ${what}: round ${round} read ${calls.length} calls`);
    if (Date.now() - lastNote > 5000) {
      lastNote = Date.now();
      debugNote(`crash point ${what}: ${traced.reader.calls.length} calls read, offset ${state.offset}, pid ${traced.pid()}`);
    }
    for (const call of calls) {
      if (trigger(call, traced.reader.calls)) {
        debugNote(`crash point ${what}: triggered by ${call.name} ${call.path}, killing ${traced.pid()}`);
        await killTree(traced);
        debugNote(`crash point ${what}: killed`);
        readNew(traced, state);
        return call;
      }
    }
    if (ended || gone(traced.pid())) {
      debugNote(`crash point ${what}: the process ended (${ended ? 'strace exited' : `${traced.pid()} gone`})`);
      // Killed by an injection: the load process it forked goes with it, as in a power loss.
      await killTree(traced);
      readNew(traced, state);
      return undefined;
    }
    if (Date.now() > deadline) {
      await killTree(traced);
      const seen = traced.reader.calls;
      throw new Error(`timed out after ${timeoutMs} ms waiting for the crash point: ${what} (the record had ${seen.length} calls on the data directory, ${seen.filter((call) => call.name === 'sync').length} syncs)`);
    }
    await sleep(10);
  }
}

/** With CRASH_DEBUG=<file>: where the harness is, appended to that file (vitest holds a test's console output back). */
export function debugNote(note: string): void {
  if (process.env.CRASH_DEBUG) appendFileSync(process.env.CRASH_DEBUG, `${new Date().toISOString()} ${note}\n`);
}

/** True when a process that was there is gone (or a zombie). */
function gone(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  try {
    return /\) Z /.test(readFileText(`/proc/${pid}/stat`));
  } catch {
    return true;
  }
}

/** SIGKILLs the harvester's process group (the worker and the load process), then waits for strace to flush its record. */
export async function killTree(traced: TracedProcess): Promise<void> {
  const pid = traced.pid();
  if (pid !== undefined) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // Gone already (an injected kill): its children are killed below through strace's exit.
    }
  }
  await traced.exited;
}

/** One answer the emulator served: its request id, the request line without `limit`, its status and when. */
export interface Served {
  requestId: string;
  url: string;
  status: number;
  seq: number;
}

/** Records every /v1 request an emulator in this process answers (node:http's diagnostics channels). */
export function recordServed(): { served: Served[]; stop(): void } {
  const served: Served[] = [];
  const onFinish = (message: unknown) => {
    const { request, response } = message as { request: IncomingMessage; response: ServerResponse };
    if (!request.url?.startsWith('/v1')) return;
    const url = new URL(request.url, 'http://emulator');
    url.searchParams.delete('limit');
    served.push({ requestId: String(response.getHeader('x-request-id') ?? ''), url: `${request.method} ${url.pathname}?${url.searchParams}`, status: response.statusCode, seq: served.length });
  };
  diagnostics.subscribe('http.server.response.finish', onFinish);
  return { served, stop: () => diagnostics.unsubscribe('http.server.response.finish', onFinish) };
}

/** What a lake holds, read through every table (every row's every column, so a torn file fails). */
export interface LakeFacts {
  tables: Record<string, number>;
  /** loaded_landings' landings, as many times as they occur. */
  landings: string[];
  /** api_calls' calls: request id and credits, as many times as they occur. */
  calls: Array<{ requestId: string; credits: number; runId: string }>;
  /** items' (platform, item id) keys, as many times as they occur. */
  items: string[];
}

/** Reads every table of the data directory's lake whole; throws what DuckDB says if one cannot be read. */
export async function readLake(dataDir: string): Promise<LakeFacts> {
  return withWarehouseQueries(dataDir, async (query) => {
    const names = (await query(`SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database() AND table_schema = 'main' AND table_type = 'BASE TABLE' ORDER BY 1`)).rows.map((row) => String(row.table_name));
    const tables: Record<string, number> = {};
    for (const name of names) {
      const row = (await query(`SELECT count(*) AS n, max(length(CAST(t AS VARCHAR))) AS w FROM "${name}" AS t`)).rows[0]!;
      tables[name] = Number(row.n);
    }
    const landings = (await query('SELECT landing FROM loaded_landings')).rows.map((row) => String(row.landing));
    const calls = (await query('SELECT request_id, credits, run_id FROM api_calls')).rows.map((row) => ({ requestId: String(row.request_id), credits: Number(row.credits), runId: String(row.run_id) }));
    const items = (await query(`SELECT platform || ':' || item_id AS k FROM items`)).rows.map((row) => String(row.k));
    return { tables, landings, calls, items };
  });
}

/** The values that occur more than once. */
export function duplicates(values: string[]): string[] {
  const seen = new Set<string>();
  const twice = new Set<string>();
  for (const value of values) (seen.has(value) ? twice : seen).add(value);
  return [...twice];
}

/**
 * The request ids of every answer whole in the data directory's segments (after the crash: the
 * answers the disk kept), a job's charge with its first results page included.
 */
export async function answersInSegments(dataDir: string): Promise<Set<string>> {
  const ids = new Set<string>();
  const folder = join(dataDir, 'segments');
  if (!existsSync(folder)) return ids;
  for (const run of readdirSync(folder)) {
    for (const name of readdirSync(join(folder, run)).filter((file) => file.endsWith('.seg'))) {
      const file = join(folder, run, name);
      for (const frame of (await readSegment(file)).frames) {
        const landing = JSON.parse(await readFrameText(file, frame)) as { request_id?: string; call?: { request_id?: string } };
        if (landing.request_id) ids.add(landing.request_id);
        if (landing.call?.request_id) ids.add(landing.call.request_id);
      }
    }
  }
  return ids;
}
