/**
 * `harvester demo` keeps its Temporal state in the data directory, as `harvester dev` does: after
 * the demo, `harvester temporal` serves its run again, and `runs`, `show`, `replay` and the
 * warehouse agree on it. The real CLI in its own processes: the demo's whole stack (Temporal dev
 * server, emulator, receiver, worker), then the dev server alone.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../src/cli/free-port.js';
import { reachable } from '../../src/temporal/connection.js';
import { CLI, runCli, type CliResult } from '../support/cli.js';
import { waitFor } from '../support/emulator.js';

/** The CLI in its own process, killed if it outlives `deadlineMs`. */
function cliWithin(args: string[], env: Record<string, string>, deadlineMs: number): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const deadline = setTimeout(() => child.kill('SIGKILL'), deadlineMs);
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(deadline);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * `harvester temporal` on `port`, once the dev server says it serves there (Temporal's CLI prints
 * its "Temporal Server: <host>:<port>" line after the server bound the port) and it answers. The
 * port came from freePort and was free then; another test's process may take it before the dev
 * server binds, in which case the server exits without that line and we start it again on other
 * ports (at most 3 times), rather than talk to whoever took the port.
 */
async function serveState(port: number, env: Record<string, string>): Promise<{ server: ChildProcess; port: number; stderr: () => string }> {
  let log = '';
  for (let attempt = 1; ; attempt += 1) {
    const server = spawn(process.execPath, [CLI, 'temporal', '--port', String(port), '--http-port', String(await freePort()), '--ui-port', String(await freePort())], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let said = '';
    server.stdout!.on('data', (chunk: Buffer) => (said += chunk.toString()));
    server.stderr!.on('data', (chunk: Buffer) => (log += chunk.toString()));
    const gone = () => server.exitCode !== null || server.signalCode !== null;
    const serving = new RegExp(`^Temporal Server:\\s+\\S+:${port}$`, 'm');
    await waitFor(async () => (gone() || (serving.test(said) && (await reachable(`127.0.0.1:${port}`))) ? true : undefined), 30_000, 'the Temporal dev server');
    if (!gone()) return { server, port, stderr: () => log };
    if (attempt === 3) throw new Error(`harvester temporal exited 3 times; it said: ${log}${said}`);
    port = await freePort();
  }
}

describe('the demo keeps its Temporal state in the data directory', () => {
  it('after `harvester demo`, `harvester temporal` serves its run to runs, show and replay, and no second server opens that state', { tags: ['long'], timeout: 300_000 }, async () => {
    const dataDir = join(mkdtempSync(join(tmpdir(), 'cli-demo-')), 'data');
    const env = { HARVESTER_DATA_DIR: dataDir, LOG_LEVEL: 'error' };
    const demo = await cliWithin(['demo'], env, 240_000);
    expect(demo.code, demo.stderr).toBe(0);
    const runId = /as (demo-\S+)…$/m.exec(demo.stdout)![1]!;
    const [, credits, items] = /^credits: (\d+) of \d+; items: (\d+);/m.exec(demo.stdout)!;
    expect(demo.stdout).toMatch(/^run demo-\S+ of demo: completed$/m);
    // The demo says where its run is now: in the data directory, for `harvester temporal` to serve.
    expect(demo.stdout).toContain(`temporal   serves it again from ${join(dataDir, 'temporal.sqlite')}`);
    expect(demo.stdout).toContain(`show ${runId}`);
    expect(existsSync(join(dataDir, 'temporal.sqlite'))).toBe(true);
    // The Python line it prints runs as printed, from elsewhere, with this machine's Python (no
    // duckdb of its own): rows, timestamps with them.
    const pythonLine = /^ {2}python: {5}(.+)$/m.exec(demo.stdout)![1]!;
    const python = spawnSync('sh', ['-c', pythonLine], { cwd: tmpdir(), encoding: 'utf8', env: { ...process.env, PYTHONPATH: '' } });
    expect(python.stderr).toBe('');
    expect(python.stdout.match(/datetime\.datetime\([^)]*tzinfo=<StaticTzInfo 'Etc\/UTC'>\)/g)).toHaveLength(3);

    const port = await freePort();
    let address = `127.0.0.1:${port}`;
    let temporalEnv = { ...env, TEMPORAL_ADDRESS: address };
    // Nothing serves it yet: the command says so, and how to serve it.
    const down = await runCli(['runs'], temporalEnv);
    expect(down.code).toBe(1);
    expect(down.stderr).toContain(`cannot reach Temporal at ${address}`);
    expect(down.stderr).toContain(`\`harvester temporal\` (Temporal alone; both keep runs, the demo's too, in ${join(dataDir, 'temporal.sqlite')})`);

    const { server, stderr: serverLog, port: servedPort } = await serveState(port, env);
    address = `127.0.0.1:${servedPort}`;
    temporalEnv = { ...env, TEMPORAL_ADDRESS: address };
    const exited = new Promise((resolve) => server.once('exit', resolve));
    try {
      const runs = await runCli(['runs', '--json'], temporalEnv);
      expect(runs.code, `${runs.stderr}\nharvester temporal said: ${serverLog()}`).toBe(0);
      expect(JSON.parse(runs.stdout)).toEqual([expect.objectContaining({ workflowId: runId, harvest: 'demo', status: 'completed', items: Number(items), credits: Number(credits), attempts: 1 })]);
      const show = await runCli(['show', runId], temporalEnv);
      expect(show.code, show.stderr).toBe(0);
      expect(show.stdout).toMatch(/^status: +completed$/m);
      const replay = await runCli(['replay', runId], temporalEnv);
      expect(replay.code, replay.stderr).toBe(0);
      expect(replay.stdout).toMatch(new RegExp(`^${runId}: \\d+ events replay cleanly`));
      const warehouse = await runCli(['query', 'SELECT run_id, status FROM harvest_runs', '--format', 'json'], temporalEnv);
      expect(JSON.parse(warehouse.stdout)).toEqual([{ run_id: runId, status: 'completed' }]);

      // A second dev server on the same state would fight the first over it: refused, naming the first.
      const second = await cliWithin(['temporal', '--port', String(await freePort()), '--http-port', String(await freePort()), '--ui-port', String(await freePort())], env, 15_000);
      expect(second.code).toBe(1);
      expect(second.stderr).toContain(`already serves ${join(dataDir, 'temporal.sqlite')} at ${address}`);
      const dev = await cliWithin(['dev', '--temporal-port', String(await freePort()), '--temporal-http-port', String(await freePort()), '--ui-port', String(await freePort()), '--emulator-port', String(await freePort()), '--receiver-port', String(await freePort())], env, 15_000);
      expect(dev.code).toBe(1);
      expect(dev.stderr).toContain(`started by \`harvester temporal\`) already serves ${join(dataDir, 'temporal.sqlite')} at ${address}`);
    } finally {
      server.kill('SIGTERM');
      await exited;
    }
  });
});
