/**
 * `harvester demo` stopped by a signal, mid-run or while its stack starts: it stops the stack it
 * started and exits 128 + the signal's number. Before, it had no listener: SIGTERM (a supervisor, a
 * CI timeout, `kill`) ended it at once and left its Temporal dev server, emulator, receiver and a
 * worker still harvesting running, with no process left to stop them.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI } from '../support/cli.js';
import { waitFor } from '../support/emulator.js';
import { alive, descendants } from '../support/processes.js';

/** Starts the demo on a data directory of its own; sends `signal` once `ready` says so; resolves with its exit and what it said, every process it started seen gone. */
async function interruptedDemo(signal: NodeJS.Signals, args: string[], ready: (output: { stdout: string; stderr: string; processes: number }) => boolean) {
  const dir = mkdtempSync(join(tmpdir(), 'demo-signals-'));
  const demo = spawn(process.execPath, [CLI, 'demo', ...args], { env: { ...process.env, HARVESTER_DATA_DIR: join(dir, 'data'), LOG_LEVEL: 'error' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  demo.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  demo.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => demo.once('exit', (code, by) => resolve({ code, signal: by })));
  const seen = new Set<number>();
  const watch = () => {
    for (const pid of descendants(demo.pid!)) seen.add(pid);
  };
  try {
    await waitFor(() => (watch(), ready({ stdout, stderr, processes: seen.size }) ? true : undefined), 180_000, `the demo to be ready for ${signal}`);
    demo.kill(signal);
    // Everything it starts meanwhile is its to stop too.
    const watching = setInterval(watch, 50);
    const exit = await exited;
    clearInterval(watching);
    await waitFor(() => ([...seen].every((pid) => !alive(pid)) ? true : undefined), 15_000, 'every process of the stack to end').catch(() => undefined);
    return { exit, stdout, stderr, left: [...seen].filter(alive), started: seen.size };
  } finally {
    for (const pid of [...seen, ...descendants(demo.pid!)]) if (alive(pid)) process.kill(pid, 'SIGKILL');
    demo.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('harvester demo and its signals', () => {
  it('SIGTERM while its run harvests: the stack is stopped, the demo exits 143, and no process it started is left', async () => {
    // Its progress line: the run started, and its worker harvests.
    const demo = await interruptedDemo('SIGTERM', [], ({ stderr }) => /running: targets \d+\/\d+, items [1-9]/.test(stderr));
    expect(demo.exit, demo.stderr).toEqual({ code: 143, signal: null });
    expect(demo.stderr).toMatch(/demo: SIGTERM: stopping the stack; run demo-\S+ stays open in Temporal's state in /);
    // Temporal's dev server, the emulator, the receiver and the worker, at least.
    expect(demo.started).toBeGreaterThanOrEqual(4);
    expect(demo.left).toEqual([]);
    expect(demo.stdout).not.toContain('Where to look next');
  }, 240_000);

  it('SIGINT while its stack starts: the stack is stopped once up, no run starts, the demo exits 130, and no process it started is left', async () => {
    const demo = await interruptedDemo('SIGINT', [], ({ stdout, processes }) => processes > 0 && !stdout.includes('Running the'));
    expect(demo.exit, demo.stderr).toEqual({ code: 130, signal: null });
    expect(demo.stderr).toContain('demo: stopping once the stack is up');
    expect(demo.stderr).toMatch(/demo: SIGINT: stopping the stack\n/);
    expect(demo.stdout).not.toContain('Running the');
    expect(demo.left).toEqual([]);
  }, 240_000);

  // A whole demo run (half a minute): the long tier.
  it('with --keep-running, Ctrl-C after the demo is its normal end: the stack is stopped and the demo exits 0', { tags: ['long'], timeout: 300_000 }, async () => {
    const demo = await interruptedDemo('SIGINT', ['--keep-running'], ({ stdout }) => stdout.includes('Where to look next'));
    expect(demo.exit, demo.stderr).toEqual({ code: 0, signal: null });
    expect(demo.stderr).not.toContain('stopping the stack');
    expect(demo.left).toEqual([]);
  });
});
