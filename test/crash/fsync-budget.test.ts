/**
 * The fsyncs a run costs (issue 38's budget): about 25 per run and one per 20 answers, counted with
 * strace on `harvester run` with its own worker (and the load process it starts) on a fresh data
 * directory, the demo's harvest against the emulator. A count, never a time: the machine's speed
 * changes how many group commits the segments take (each an fdatasync), not whether the budget holds.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/project-paths.js';
import { runCliUnder, type CliResult } from '../support/cli.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';

let emulator: TestEmulator;
beforeAll(async () => {
  emulator = await startTestEmulator();
});
afterAll(() => emulator.close());

/** Runs the CLI under `strace -f -y -e trace=fsync,fdatasync`; resolves with its exit code and its output, the trace in its file. */
function tracedRun(args: string[], env: Record<string, string>, trace: string): Promise<CliResult> {
  return runCliUnder(['strace', '-f', '-y', '-qq', '-e', 'trace=fsync,fdatasync', '-o', trace], args, env);
}

/** The fsync and fdatasync calls of a trace, each once (a call strace split in two is counted at its start), by path. */
function syncsOf(trace: string): string[] {
  const paths: string[] = [];
  for (const line of readFileSync(trace, 'utf8').split('\n')) {
    const match = /^\d+\s+f(?:data)?sync\(\d+<([^>]*)>/.exec(line);
    if (match) paths.push(match[1]!);
  }
  return paths;
}

describe('the fsyncs of a run', () => {
  it('the demo run with its own worker, on a fresh data directory, stays within 25 fsyncs and one per 20 answers loaded', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fsync-budget-'));
    const dataDir = join(dir, 'data');
    const trace = join(dir, 'trace');
    const env = {
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      HARVESTER_DATA_DIR: dataDir,
      SOCIAL_API_BASE_URL: emulator.baseUrl,
      SOCIAL_API_KEY: emulator.apiKey,
      LOG_LEVEL: 'error',
    };
    const run = await tracedRun(['run', 'demo', '--config', join(PROJECT_ROOT, 'config', 'demo.yaml')], env, trace);
    expect(run.code, run.stderr).toBe(0);
    const landings = Number(/loaded (\d+) landings/.exec(run.stdout)?.[1]);
    expect(landings).toBeGreaterThan(1000);

    const syncs = syncsOf(trace);
    const budget = 25 + landings / 20;
    const byPath = new Map<string, number>();
    for (const path of syncs) {
      const kind = path.startsWith(dataDir) ? path.slice(dataDir.length).replace(/[^/]*$/, '…') : path;
      byPath.set(kind, (byPath.get(kind) ?? 0) + 1);
    }
    const report = [...byPath].sort((a, b) => b[1] - a[1]).map(([path, n]) => `${n} ${path}`).join('\n');
    console.log(`${syncs.length} fsyncs, budget ${budget} (${landings} landings)`);
    expect(syncs.length, `${syncs.length} fsyncs against a budget of ${budget} (${landings} landings):\n${report}`).toBeLessThanOrEqual(budget);
    // Every data file the loads wrote was synced (the budget was not met by leaving them out).
    expect(syncs.some((path) => /\/lake\/data\/main\/raw_answers\/ducklake-[^/]+\.parquet$/.test(path))).toBe(true);
  });
});
