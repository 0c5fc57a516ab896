/**
 * The local stack, as child processes of this one: the Temporal dev server, the emulator (unless
 * a real API is configured), the HTTPS webhook receiver registered with the API, and a worker.
 * Each logs to a file under the data directory. `harvester dev` keeps it up; `harvester demo`
 * brings it up for one run.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { METRICS_PORT_VARIABLE } from './metrics-endpoint.js';
import { createWriteStream, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { SocialApiClient } from '../api/client.js';
import { loadPriceTable } from '../config/prices.js';
import { TOOLS_DIR } from '../project-paths.js';
import { TEMPORAL_BINARY, devServerArgs, recordDevServer, runningDevServer, servedAlready } from '../temporal/dev-server.js';
import { readSecrets, writeSecrets } from '../store/secret-store.js';
import { devServerDbFile, distributedFiles, logsFolder, secretStorePath, serviceLogFile, workerMachineFolder } from '../store/layout.js';
import { HARVEST_TASK_QUEUE } from '../../workflows/definitions.js';
import { lakeLocation } from '../warehouse/lake.js';
import type { SharedServices } from './shared-services.js';
import { isProcessAlive } from '../store/process-alive.js';
import { choosePorts, portMovedNote, type ServicePorts } from './service-ports.js';


/**
 * Node flags for a worker process. A heap bounded at 160 MB keeps a worker's memory flat however
 * many items its runs land (V8 otherwise lets garbage grow the heap towards its default limit of
 * a quarter of the machine's memory): bench/harvest-e2e.mjs measured 317 MiB at 100k items and
 * 506 MiB at 1M without them, 218 and 244 MiB with them, at the same speed.
 */
export const WORKER_NODE_FLAGS = ['--max-old-space-size=160', '--max-semi-space-size=4'];

export interface StackOptions {
  dataDir: string;
  /** Serve the emulator; otherwise SOCIAL_API_BASE_URL and SOCIAL_API_KEY name the API. */
  emulator: boolean;
  temporalPort: number;
  /** The dev server's HTTP API port (TEMPORAL_HTTP_ADDRESS): where `harvester run` starts runs. */
  temporalHttpPort: number;
  /** 0 for no UI. */
  uiPort: number;
  emulatorPort: number;
  receiverPort: number;
  /** Keep Temporal's state in a SQLite file under the data directory (dev, demo), or in memory. */
  persistent: boolean;
  /** The command that starts the stack (dev, demo), as the dev server's record names it. */
  by: string;
  /**
   * When a dev server already serves the data directory's Temporal state, use it (the demo) with
   * a task queue of the stack's own, instead of refusing to start a second one (dev).
   */
  reuseTemporal?: boolean;
  /**
   * Scale-out on one machine: PostgreSQL and MinIO as the shared store, and this many workers,
   * each with a scratch directory of its own and no disk in common (startSharedStore).
   */
  distributedWorkers?: number;
  /** The first worker's metrics port (HARVESTER_METRICS_PORT); each further worker takes the next. */
  metricsPort?: number;
  /** With distributedWorkers: PostgreSQL's and MinIO's ports; by default those of the last start (or free ones). */
  postgresPort?: number;
  minioPort?: number;
  /** Told at once when a process of the stack dies, and when it is back: `harvester dev` prints it. */
  onEvent?: (line: string) => void;
}

export interface Stack {
  temporalAddress: string;
  /** Set when the stack uses a dev server that was running already, not one of its own. */
  reusedTemporal?: { pid: number; by: string };
  /** The task queue of the stack's worker. */
  taskQueue: string;
  uiUrl?: string;
  apiBaseUrl: string;
  apiKey: string;
  receiverUrl: string;
  logsDir: string;
  /** The environment a `harvester` command needs to use this stack, but secrets. */
  env: Record<string, string>;
  /** With shared storage: the file (readable by its owner only) that exports its environment, credentials included. */
  sharedEnvFile?: string;
  /** The workers' scratch directories. */
  workerDirs: string[];
  /** Where the warehouse is, without secrets. */
  warehouse: string;
  stop(): Promise<void>;
}

const CLI = fileURLToPath(new URL('./main.js', import.meta.url));
const DEV_CA = join(TOOLS_DIR, 'certs', 'ca.pem');


async function waitForPort(port: number, child: ChildProcess, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${what} exited with code ${child.exitCode}; see its log`);
    const open = await new Promise<boolean>((resolve) => {
      const socket = createConnection({ port, host: '127.0.0.1' }, () => {
        socket.end();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    await sleep(100);
  }
  throw new Error(`${what} did not listen on port ${port} within ${timeoutMs / 1000} s; see its log`);
}

type Launch = (name: string, command: string, args: string[], env: Record<string, string>) => ChildProcess;

/**
 * Launches the stack's child processes, each logging to its own file, and stops them, the last
 * launched first. A child that dies while the stack runs is said at once (`say`) and started again
 * in place: the same command, so the same port and the same data; the others are not touched.
 */
function childProcesses(logsDir: string, say: (line: string) => void): { launch: Launch; stop: () => Promise<void>; mayRestart: (name: string) => boolean; stopping: () => boolean } {
  const children: { name: string; child: ChildProcess }[] = [];
  /** Set once the stack stops: a child that exits then is not started again. */
  let stopping = false;
  /** When each process was last started again: one that keeps dying is left down, said so, rather than restarted in a loop. */
  const restarts = new Map<string, number[]>();
  const mayRestart = (name: string): boolean => {
    const recent = (restarts.get(name) ?? []).filter((at) => Date.now() - at < 60_000);
    restarts.set(name, [...recent, Date.now()]);
    return recent.length < 5;
  };
  const launch: Launch = (name, command, args, env) => {
    const log = createWriteStream(serviceLogFile(logsDir, name), { flags: 'a' });
    const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    const entry = children.find((running) => running.name === name);
    if (entry) entry.child = child;
    else children.push({ name, child });
    child.once('exit', (code, signal) => {
      if (stopping) return;
      const how = signal ? `was killed (${signal})` : `exited with code ${code}`;
      if (!mayRestart(name)) {
        say(`dev: ${name} ${how}, the sixth time within a minute: left down; see ${serviceLogFile(logsDir, name)}`);
        return;
      }
      say(`dev: ${name} ${how}; starting it again in place (its log: ${serviceLogFile(logsDir, name)})`);
      launch(name, command, args, env);
    });
    return child;
  };
  const stop = async () => {
    stopping = true;
    for (const { child } of [...children].reverse()) {
      if (child.exitCode !== null || child.signalCode !== null) continue;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(10_000).then(() => child.kill('SIGKILL'))]);
    }
  };
  return { launch, stop, mayRestart, stopping: () => stopping };
}

/** Starts the Temporal dev server as the stack's child; a persistent one is recorded, so another stack can reuse it. */
async function startDevServer(options: StackOptions, launch: Launch): Promise<{ temporalAddress: string; temporalHttpAddress: string | undefined; uiUrl: string | undefined; forgetServer: (() => void) | undefined }> {
  const temporal = launch(
    'temporal',
    TEMPORAL_BINARY,
    devServerArgs({ port: options.temporalPort, httpPort: options.temporalHttpPort, uiPort: options.uiPort || undefined, ...(options.persistent ? { dbFile: devServerDbFile(options.dataDir) } : {}) }),
    {},
  );
  await waitForPort(options.temporalPort, temporal, 'the Temporal dev server');
  const temporalAddress = `127.0.0.1:${options.temporalPort}`;
  const temporalHttpAddress = `127.0.0.1:${options.temporalHttpPort}`;
  const uiUrl = options.uiPort ? `http://127.0.0.1:${options.uiPort}` : undefined;
  const forgetServer = options.persistent ? recordDevServer(options.dataDir, { pid: temporal.pid!, address: temporalAddress, httpAddress: temporalHttpAddress, ...(uiUrl ? { uiUrl } : {}), by: options.by }) : undefined;
  return { temporalAddress, temporalHttpAddress, uiUrl, forgetServer };
}

/**
 * The receiver's endpoint at the API, registered once: an endpoint for the same URL whose secret
 * is not in the secret store is replaced, so repeated starts do not pile up endpoints at the API.
 */
async function registerReceiver(api: SocialApiClient, receiverUrl: string, secretStore: string): Promise<void> {
  try {
    const known = readSecrets(secretStore);
    const registered = (await api.listWebhooks()).filter((endpoint) => endpoint.url === receiverUrl);
    const usable = registered.find((endpoint) => known.some((entry) => entry.webhook_id === endpoint.webhook_id));
    if (usable) return;
    for (const stale of registered) await api.deleteWebhook(stale.webhook_id);
    const created = await api.createWebhook(receiverUrl, ['job.completed', 'credits.low', 'plan.changed']);
    writeSecrets(secretStore, [...known.filter((entry) => entry.url !== receiverUrl), { webhook_id: created.webhook_id, url: created.url, secret: created.secret }]);
  } finally {
    await api.close();
  }
}

export async function startStack(options: StackOptions): Promise<Stack> {
  const logsDir = logsFolder(options.dataDir);
  mkdirSync(logsDir, { recursive: true });
  if (!existsSync(TEMPORAL_BINARY)) throw new Error(`no Temporal CLI at ${TEMPORAL_BINARY}: run \`npm run setup\``);
  const say = options.onEvent ?? (() => undefined);
  const { launch, stop, mayRestart, stopping } = childProcesses(logsDir, say);
  let forgetServer: (() => void) | undefined;
  let watchingServices: NodeJS.Timeout | undefined;
  /** Services that are not child processes of ours to signal (PostgreSQL runs detached): stopped last. */
  const launchedServices: (() => Promise<void>)[] = [];
  const stopAll = async () => {
    clearInterval(watchingServices);
    await stop();
    for (const stopService of launchedServices.reverse()) await stopService().catch(() => undefined);
    forgetServer?.();
  };
  try {
    const running = options.persistent ? await runningDevServer(options.dataDir) : undefined;
    if (running && !options.reuseTemporal) throw new Error(servedAlready(options.dataDir, running));
    const server = running ? { temporalAddress: running.address, temporalHttpAddress: running.httpAddress, uiUrl: running.uiUrl, forgetServer: undefined } : await startDevServer(options, launch);
    forgetServer = server.forgetServer;
    const { temporalAddress, temporalHttpAddress, uiUrl } = server;
    // On a server that was running already, the stack's worker takes only the stack's own runs.
    const taskQueue = running ? `${options.by}-${process.pid}` : (process.env.HARVESTER_TASK_QUEUE || HARVEST_TASK_QUEUE);

    let apiBaseUrl = process.env.SOCIAL_API_BASE_URL ?? '';
    let apiKey = process.env.SOCIAL_API_KEY ?? '';
    if (options.emulator) {
      const emulator = launch('emulator', process.execPath, [CLI, 'emulator', '--port', String(options.emulatorPort)], { NODE_EXTRA_CA_CERTS: DEV_CA });
      await waitForPort(options.emulatorPort, emulator, 'the emulator');
      apiBaseUrl = `http://127.0.0.1:${options.emulatorPort}/v1`;
      apiKey = 'sk_live_emulator_42';
    } else if (!apiBaseUrl || !apiKey) {
      throw new Error('--no-emulator needs SOCIAL_API_BASE_URL and SOCIAL_API_KEY');
    }
    const shared = options.distributedWorkers ? await startSharedStore(options.dataDir, launchedServices, { postgres: options.postgresPort, minio: options.minioPort }, say) : undefined;
    if (shared) watchingServices = watchSharedServices(shared.services, (name) => !stopping() && mayRestart(name), say);
    const env: Record<string, string> = {
      TEMPORAL_ADDRESS: temporalAddress,
      ...(temporalHttpAddress ? { TEMPORAL_HTTP_ADDRESS: temporalHttpAddress } : {}),
      SOCIAL_API_BASE_URL: apiBaseUrl,
      SOCIAL_API_KEY: apiKey,
      HARVESTER_DATA_DIR: options.dataDir,
      ...(running ? { HARVESTER_TASK_QUEUE: taskQueue } : {}),
      NODE_EXTRA_CA_CERTS: DEV_CA,
      ...shared?.env,
    };

    const receiverUrl = `https://localhost:${options.receiverPort}/`;
    await registerReceiver(new SocialApiClient({ baseUrl: apiBaseUrl, apiKey, prices: loadPriceTable() }), receiverUrl, secretStorePath(options.dataDir));
    const receiver = launch('receiver', process.execPath, [CLI, 'receiver', '--port', String(options.receiverPort)], env);
    await waitForPort(options.receiverPort, receiver, 'the webhook receiver');
    const workerDirs = shared ? Array.from({ length: options.distributedWorkers ?? 1 }, (_, index) => workerMachineFolder(options.dataDir, index + 1)) : [options.dataDir];
    workerDirs.forEach((workerDir, index) => {
      mkdirSync(workerDir, { recursive: true });
      const metrics: Record<string, string> = options.metricsPort === undefined ? {} : { [METRICS_PORT_VARIABLE]: String(options.metricsPort === 0 ? 0 : options.metricsPort + index) };
      launch(shared ? `worker-${index + 1}` : 'worker', process.execPath, [...WORKER_NODE_FLAGS, CLI, 'worker'], { ...env, ...metrics, HARVESTER_DATA_DIR: workerDir });
    });

    return {
      temporalAddress,
      ...(running ? { reusedTemporal: { pid: running.pid, by: running.by } } : {}),
      taskQueue,
      ...(uiUrl ? { uiUrl } : {}),
      apiBaseUrl,
      apiKey,
      receiverUrl,
      logsDir,
      env: shared ? Object.fromEntries(Object.entries(env).filter(([name]) => !shared.secretNames.includes(name))) : env,
      ...(shared ? { sharedEnvFile: shared.envFile } : {}),
      workerDirs,
      warehouse: lakeLocation(options.dataDir, { ...process.env, ...env }).description,
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

/** What the stack's processes need to share one store, and which of it is secret. */
interface SharedStoreSettings {
  env: Record<string, string>;
  secretNames: string[];
  envFile: string;
  services: SharedServices;
}

/**
 * PostgreSQL and MinIO are not children this process launches with `launch`: each is looked at
 * every 2 s, and one found dead is said at once and started again in place.
 */
function watchSharedServices(services: SharedServices, mayRestart: (name: string) => boolean, say: (line: string) => void): NodeJS.Timeout {
  let checking = false;
  return setInterval(() => {
    if (checking) return;
    checking = true;
    void restartDeadServices(services, mayRestart, say).finally(() => (checking = false));
  }, 2_000);
}


/** Starts again, in place, whichever of PostgreSQL and MinIO has died, saying so. */
async function restartDeadServices(services: SharedServices, mayRestart: (name: string) => boolean, say: (line: string) => void): Promise<void> {
  for (const [name, service] of [
    ['postgres', services.postgres],
    ['minio', services.minio],
  ] as const) {
    if (isProcessAlive(service.pid())) continue;
    if (!mayRestart(name)) continue;
    say(`dev: ${name} is not running; starting it again in place (port ${service.port}, the same data)`);
    try {
      await service.start();
      say(`dev: ${name} is back on port ${service.port}`);
    } catch (error) {
      say(`dev: ${name} could not be started again: ${(error as Error).message}`);
    }
  }
}

/**
 * PostgreSQL and MinIO for `harvester dev --distributed`, under <data dir>/distributed/. Their
 * credentials are made at the first start and kept in a file only its owner reads, beside the
 * environment file that exports them; later starts reuse both, and the ports of the last start
 * unless others are given, so the store, and every environment that names it, outlives a restart.
 * A remembered port another process took is given up for a free one, and said (choosePorts).
 */
async function startSharedStore(
  dataDir: string,
  launched: (() => Promise<void>)[],
  ports: { postgres?: number | undefined; minio?: number | undefined },
  say: (line: string) => void,
): Promise<SharedStoreSettings> {
  const { newSecret, startSharedServices } = await import('./shared-services.js');
  const files = distributedFiles(dataDir);
  const folder = files.folder;
  mkdirSync(folder, { recursive: true });
  const credentialsFile = files.credentials;
  const credentials = existsSync(credentialsFile)
    ? (JSON.parse(readFileSync(credentialsFile, 'utf8')) as { postgresPassword: string; accessKeyId: string; secretAccessKey: string })
    : { postgresPassword: newSecret(), accessKeyId: `harvester${newSecret().slice(0, 8)}`, secretAccessKey: newSecret() };
  writeFileSync(credentialsFile, JSON.stringify(credentials), { mode: 0o600 });
  const portsFile = files.ports;
  const last = existsSync(portsFile) ? (JSON.parse(readFileSync(portsFile, 'utf8')) as ServicePorts) : {};
  const given = { ...(ports.postgres ? { postgres: ports.postgres } : {}), ...(ports.minio ? { minio: ports.minio } : {}) };
  const chosen = await choosePorts(given, last);
  const services = await startSharedServices(folder, credentials, chosen.ports);
  launched.push(() => services.stop());
  writeFileSync(portsFile, JSON.stringify({ postgres: services.postgres.port, minio: services.minio.port }));
  const env = services.environment('harvests');
  const envFile = files.env;
  for (const service of ['postgres', 'minio'] as const) {
    const was = chosen.taken[service];
    if (was !== undefined) say(portMovedNote(service, was, services[service].port, envFile));
  }
  writeFileSync(envFile, Object.entries(env).map(([name, value]) => `export ${name}='${value}'\n`).join(''), { mode: 0o600 });
  return { env, secretNames: ['HARVESTER_CATALOG', 'AWS_SECRET_ACCESS_KEY'], envFile, services };
}
