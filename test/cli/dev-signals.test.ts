/**
 * `harvester dev` stopped by Ctrl-C while its stack is still starting: it stops what it started and
 * exits 0. Node's default for SIGINT, before dev's own handler, ended dev at once and left the
 * Temporal dev server (and whatever else had started) running, with no process to stop them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../src/cli/free-port.js';
import { stoppedBySignal } from '../support/processes.js';

describe('harvester dev and its signals', () => {
  it('SIGINT while the stack starts: the stack is stopped once up, dev exits 0, and no process it started is left', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dev-signals-'));
    const args = ['--temporal-port', '--temporal-http-port', '--ui-port', '--emulator-port', '--receiver-port'].flatMap((option) => [option, '0']);
    for (let index = 1; index < args.length; index += 2) args[index] = String(await freePort());
    try {
      // The first child (the Temporal dev server) is up and the stack is not: the signal comes mid-start.
      const dev = await stoppedBySignal(['dev', ...args], { HARVESTER_DATA_DIR: join(dir, 'data') }, 'SIGINT', ({ stdout, processes }) => processes > 0 && !stdout.includes('Ctrl-C stops everything'), 120_000);
      expect({ code: dev.exit.code, stderr: dev.exit.code === 0 ? '' : dev.stderr }).toEqual({ code: 0, stderr: '' });
      expect(dev.stderr).toContain('dev: stopping once the stack is up');
      expect(dev.left).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 240_000);
});
