/**
 * `harvester demo` stopped by a signal, mid-run or while its stack starts: it stops the stack it
 * started and exits 128 + the signal's number. Before, it had no listener: SIGTERM (a supervisor, a
 * CI timeout, `kill`) ended it at once and left its Temporal dev server, emulator, receiver and a
 * worker still harvesting running, with no process left to stop them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stoppedBySignal } from '../support/processes.js';

/** Starts the demo on a data directory of its own, and stops it with `signal` once `ready` says so (stoppedBySignal). */
async function interruptedDemo(signal: NodeJS.Signals, args: string[], ready: Parameters<typeof stoppedBySignal>[3]) {
  const dir = mkdtempSync(join(tmpdir(), 'demo-signals-'));
  try {
    return await stoppedBySignal(['demo', ...args], { HARVESTER_DATA_DIR: join(dir, 'data'), LOG_LEVEL: 'error' }, signal, ready);
  } finally {
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
