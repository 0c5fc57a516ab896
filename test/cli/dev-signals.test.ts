/**
 * `harvester dev` stopped by Ctrl-C while its stack is still starting: it stops what it started and
 * exits 0. Node's default for SIGINT, before dev's own handler, ended dev at once and left the
 * Temporal dev server (and whatever else had started) running, with no process to stop them.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../src/cli/free-port.js';
import { CLI } from '../support/cli.js';
import { waitFor } from '../support/emulator.js';
import { alive, descendants } from '../support/processes.js';

describe('harvester dev and its signals', () => {
  it('SIGINT while the stack starts: the stack is stopped once up, dev exits 0, and no process it started is left', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dev-signals-'));
    const args = ['--temporal-port', '--temporal-http-port', '--ui-port', '--emulator-port', '--receiver-port'].flatMap((option) => [option, '0']);
    for (let index = 1; index < args.length; index += 2) args[index] = String(await freePort());
    const dev = spawn(process.execPath, [CLI, 'dev', ...args], { env: { ...process.env, HARVESTER_DATA_DIR: join(dir, 'data') }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    dev.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    dev.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => dev.once('exit', resolve));
    const seen = new Set<number>();
    try {
      // The first child (the Temporal dev server) is up and the stack is not: the signal comes mid-start.
      await waitFor(() => (descendants(dev.pid!).length > 0 && !stdout.includes('Ctrl-C stops everything') ? true : undefined), 120_000, 'dev to start its first process');
      for (const pid of descendants(dev.pid!)) seen.add(pid);
      dev.kill('SIGINT');
      // Everything it starts meanwhile is its to stop too.
      const watching = setInterval(() => {
        for (const pid of descendants(dev.pid!)) seen.add(pid);
      }, 50);
      const code = await exited;
      clearInterval(watching);
      expect({ code, stderr: code === 0 ? '' : stderr }).toEqual({ code: 0, stderr: '' });
      expect(stderr).toContain('dev: stopping once the stack is up');
      await waitFor(() => ([...seen].every((pid) => !alive(pid)) ? true : undefined), 15_000, 'every process of the stack to end').catch(() => undefined);
      expect([...seen].filter(alive)).toEqual([]);
    } finally {
      for (const pid of [...seen, ...descendants(dev.pid!)]) if (alive(pid)) process.kill(pid, 'SIGKILL');
      dev.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  }, 240_000);
});
