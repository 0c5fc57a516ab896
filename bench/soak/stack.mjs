/**
 * The chaos soak's stack (bench/chaos-soak.mjs): the Temporal dev server (restartable on its port
 * and SQLite file), the emulator as its own process, the corrupting proxy every worker reaches it
 * through (passing answers through unless a fault says otherwise), and the children it tracks so
 * that none outlives the soak.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { startEmulatorProcess } from '../emulator-process.mjs';

const dist = join(new URL('../..', import.meta.url).pathname, 'dist');
export const CLI = join(dist, 'src', 'cli', 'main.js');
const { devServerArgs, TEMPORAL_BINARY } = await import(join(dist, 'src/temporal/dev-server.js'));
const { freePort } = await import(join(dist, 'src/cli/free-port.js'));
const { startCorruptingProxy } = await import(join(dist, 'src/emulator/corrupting-proxy.js'));

import { waitFor } from '../private-tmpfs.mjs';
export { waitFor };

const children = new Set();

/** Tracks a child: killed at cleanup, with `exited` resolving to its code and signal. */
export function track(child) {
  children.add(child);
  child.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  void child.exited.then(() => children.delete(child));
  return child;
}

/** A harvester command's output and exit code; `command` is [file, args] (nsenter for a run in a mount namespace). */
export function cli([file, args], env) {
  return new Promise((resolve) => {
    const child = track(spawn(file, args, { env, stdio: ['ignore', 'pipe', 'pipe'] }));
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Starts Temporal, the emulator (with `keys`) and the proxy; `out` holds Temporal's SQLite file. */
export async function startStack(out, keys) {
  const temporalPort = await freePort();
  const temporalAddress = `127.0.0.1:${temporalPort}`;
  let server;
  const startTemporal = async () => {
    server = track(spawn(TEMPORAL_BINARY, devServerArgs({ port: temporalPort, dbFile: join(out, 'temporal.sqlite') }), { stdio: 'ignore' }));
    await waitFor(
      async () => {
        try {
          const probe = await Connection.connect({ address: temporalAddress, connectTimeout: 1_000 });
          await probe.workflowService.getSystemInfo({});
          await probe.close();
          return true;
        } catch {
          return undefined;
        }
      },
      60_000,
      'Temporal to answer',
      250,
    );
  };
  const stopTemporal = async () => {
    server.kill('SIGTERM');
    if (!(await Promise.race([server.exited, sleep(15_000)]))) server.kill('SIGKILL');
    await server.exited;
  };
  await startTemporal();
  const connection = await Connection.connect({ address: temporalAddress });
  const emulator = await startEmulatorProcess([...keys.flatMap((key) => ['--api-key', key]), '--latency-ms', '30', '--rate-limit', '1000', '--credits', '100000000']);
  track(emulator.child);
  const admin = async (path, body) => {
    const response = await fetch(`${emulator.origin}/_emulator/${path}`, body === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const json = await response.json();
    if (!response.ok) throw new Error(`admin ${path}: ${response.status} ${JSON.stringify(json)}`);
    return json.data;
  };
  const catalog = await admin('catalog');
  const proxy = await startCorruptingProxy({ upstream: emulator.origin, otherHandles: { tiktok: catalog.tiktok.handles, instagram: catalog.instagram.handles } });
  return {
    temporalAddress,
    temporal: new Client({ connection }),
    emulator,
    proxy,
    catalog,
    admin,
    startTemporal,
    stopTemporal,
    ledgerOf: (key) => admin(`ledger?api_key=${key}`),
    async close() {
      for (const child of children) child.kill('SIGKILL');
      await proxy.close().catch(() => undefined);
      await connection.close().catch(() => undefined);
    },
  };
}
