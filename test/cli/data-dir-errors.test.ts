/**
 * A data directory that cannot be made fails the command at once, saying which and why: under
 * /proc, Node's recursive mkdir never returns (it looped at 92 % CPU, ignoring SIGTERM).
 */
import { describe, expect, inject, it } from 'vitest';
import { makeDirectory } from '../../src/store/make-directory.js';
import { runCli } from '../support/cli.js';

describe('a data directory that cannot be made', () => {
  it('makeDirectory throws instead of looping', () => {
    expect(() => makeDirectory('/proc/nope/deeper')).toThrow(/ENOENT/);
  });

  it('`harvester run` fails fast with a clear error', async () => {
    const result = await runCli(['run', 'creators-daily', '--config', 'config/harvests.yaml'], {
      HARVESTER_DATA_DIR: '/proc/nope',
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      SOCIAL_API_BASE_URL: 'http://127.0.0.1:9',
      SOCIAL_API_KEY: 'sk_live_nowhere',
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('the data directory /proc/nope (HARVESTER_DATA_DIR) cannot be written');
  }, 30_000);
});
