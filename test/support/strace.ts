/**
 * A process run under strace (on these machines: /usr/bin/strace), and what its trace says of the
 * files it wrote and synced: which were written after their last fsync, which a power loss right
 * after the process ended could take back.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** The calls traced: opens, writes, syncs, renames and unlinks, with each descriptor's path (-y). */
const TRACED = 'openat,write,pwrite64,writev,pwritev,pwritev2,fsync,fdatasync,unlink,unlinkat,rename,renameat,renameat2,mkdir,mkdirat';

/** Runs `args` under strace, following its threads and children; resolves with its exit code and the trace's file. */
export function traced(traceFile: string, command: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const child = spawn('strace', ['-f', '-y', '-qq', '-e', `trace=${TRACED}`, '-o', traceFile, command, ...args], { stdio: ['ignore', 'inherit', 'inherit'], env });
    child.once('error', reject);
    child.once('exit', (code) => resolve(code));
  });
}

/** One traced call, in the order the calls began: its name and the path it acted on. */
export interface TracedCall {
  call: string;
  path: string;
  /** An openat that may create its file (O_CREAT). */
  creates?: boolean;
}

/** The calls of a trace, each with the path of its descriptor or its first path argument. */
export function callsOf(traceFile: string): TracedCall[] {
  const calls: TracedCall[] = [];
  for (const line of readFileSync(traceFile, 'utf8').split('\n')) {
    // "<pid> name(args…": resumed halves ("<... fsync resumed>") carry no path.
    const match = /^\d+\s+(\w+)\((.*)$/.exec(line);
    if (!match) continue;
    const [, call, args] = match as unknown as [string, string, string];
    const path = call === 'openat' || call.startsWith('unlink') || call.startsWith('rename') || call.startsWith('mkdir') ? /"([^"]*)"/.exec(args)?.[1] : /^\d+<([^>]*)>/.exec(args)?.[1];
    if (path !== undefined) calls.push({ call, path, ...(call === 'openat' && args.includes('O_CREAT') ? { creates: true } : {}) });
  }
  return calls;
}

const WRITES = new Set(['write', 'pwrite64', 'writev', 'pwritev', 'pwritev2']);
const SYNCS = new Set(['fsync', 'fdatasync']);

/** Files under `prefix` whose last write came after their last fsync (or that were never synced): lost to a power loss. */
export function writtenAfterLastSync(calls: readonly TracedCall[], prefix: string): string[] {
  const state = new Map<string, boolean>();
  for (const { call, path } of calls) {
    if (!path.startsWith(prefix)) continue;
    if (WRITES.has(call)) state.set(path, false);
    else if (SYNCS.has(call) && state.has(path)) state.set(path, true);
  }
  return [...state].filter(([, synced]) => !synced).map(([path]) => path);
}

/** The index of the first call matching `test` at or after `from` (from the start when negative), or -1. */
export function indexOf(calls: readonly TracedCall[], test: (call: TracedCall) => boolean, from = 0): number {
  for (let index = Math.max(0, from); index < calls.length; index++) if (test(calls[index] as TracedCall)) return index;
  return -1;
}
