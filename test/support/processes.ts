/** The processes a command started, from /proc: what a test checks is gone once the command stopped. */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { CLI } from './cli.js';
import { waitFor } from './emulator.js';

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Every process under `root`, by their parents in /proc. */
export function descendants(root: number): number[] {
  const parents = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The command name may hold spaces and parentheses: the fields after its last ')' are plain.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      parents.set(Number(entry), Number(fields[1]));
    } catch {
      // Gone meanwhile.
    }
  }
  const found: number[] = [];
  const walk = (pid: number) => {
    for (const [child, parent] of parents) {
      if (parent === pid) {
        found.push(child);
        walk(child);
      }
    }
  };
  walk(root);
  return found;
}

/** What a command stopped by a signal did: how it exited, what it said, and the processes it started. */
export interface SignalledCommand {
  exit: { code: number | null; signal: NodeJS.Signals | null };
  stdout: string;
  stderr: string;
  /** How many processes it started, seen under it in /proc until it exited. */
  started: number;
  /** Those still alive after it exited (and 15 s for them to end). */
  left: number[];
}

/**
 * Runs the CLI with `args` and `env`, sends it `signal` once `ready` says so (given its output so
 * far and how many processes it has started), and follows it to its exit, noting every process it
 * starts meanwhile too; then reports which are left. Whatever is left is killed afterwards.
 */
export async function stoppedBySignal(
  args: string[],
  env: Record<string, string>,
  signal: NodeJS.Signals,
  ready: (output: { stdout: string; stderr: string; processes: number }) => boolean,
  readyWithinMs = 180_000,
): Promise<SignalledCommand> {
  const command = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  command.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  command.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<SignalledCommand['exit']>((resolve) => command.once('exit', (code, by) => resolve({ code, signal: by })));
  const seen = new Set<number>();
  const watch = () => {
    for (const pid of descendants(command.pid!)) seen.add(pid);
  };
  try {
    await waitFor(() => (watch(), ready({ stdout, stderr, processes: seen.size }) ? true : undefined), readyWithinMs, `\`${args[0]}\` to be ready for ${signal}`);
    command.kill(signal);
    // Everything it starts meanwhile is its to stop too.
    const watching = setInterval(watch, 50);
    const exit = await exited;
    clearInterval(watching);
    await waitFor(() => ([...seen].every((pid) => !alive(pid)) ? true : undefined), 15_000, 'every process it started to end').catch(() => undefined);
    return { exit, stdout, stderr, started: seen.size, left: [...seen].filter(alive) };
  } finally {
    for (const pid of [...seen, ...descendants(command.pid!)]) if (alive(pid)) process.kill(pid, 'SIGKILL');
    command.kill('SIGKILL');
  }
}
