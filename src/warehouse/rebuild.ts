/**
 * A rebuild: the warehouse's tables derived again from the answers the lake keeps (`raw_answers`),
 * through the same normalize and merge stages a load uses, in one transaction (one snapshot:
 * readers see the old tables or the new, never a mix). What the loads made and what a rebuild makes
 * are the same rows; a column added since is filled from answers already paid for. The load's own
 * records (`loaded_landings`, `raw_answers`, `loaded_segments`) are kept as they are.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import type { DuckDBInstance } from '@duckdb/node-api';
import type { Logger } from '../logger.js';
import { loadPackageFolder } from '../store/layout.js';
import { LocalStore, type Store } from '../store/store.js';
import { inTransaction, scalarOf } from './duckdb.js';
import { latestSnapshot, openLakeWriter, type LakeConnection } from './lake.js';
import { repairLake, type LakeRepair } from './lake-repair.js';
import type { LoadPackage } from './extract.js';
import type { LandingShape } from './raw-columns.js';
import { landingShape, loadPackageFiles } from './landing-shape.js';
import { ensureSchema } from './loader.js';
import { mergeStaged } from './merge.js';
import { normalize } from './normalize.js';
import { STAGED_TABLES } from './schema.js';

export interface RebuildOptions {
  store?: Store;
  engine?: DuckDBInstance;
  logger?: Logger;
  /** Answers merged per step; memory follows the step, not the lake. */
  batchAnswers?: number;
  lockWaitMs?: number;
}

export interface RebuildResult {
  answers: number;
  /** What was damaged in the lake, set aside before the rebuild, and what of it was lost. */
  repair?: LakeRepair;
  snapshot: number;
  durationMs: number;
}

export async function rebuildLake(dataDir: string, options: RebuildOptions = {}): Promise<RebuildResult> {
  const store = options.store ?? new LocalStore(dataDir);
  return store.asLakeWriter(async () => {
    const started = Date.now();
    const lake = await openLakeWriter(dataDir, options.lockWaitMs ?? 120_000, { engine: options.engine, create: ensureSchema });
    try {
      // Files of the lake that are not whole are set aside first (a table with one cannot even be emptied).
      const repair = await repairLake(lake, dataDir, { logger: options.logger, rebuild: false });
      await ensureSchema(lake.connection);
      const answers = await rederiveTables(lake, dataDir, options);
      return { answers, snapshot: await latestSnapshot(lake.connection), durationMs: Date.now() - started, ...(repair ? { repair } : {}) };
    } finally {
      await lake.close();
    }
  });
}

/**
 * Derives every staged table again from `raw_answers`, in one transaction of the open writer
 * `lake`: the rebuild, and the repair of a damaged lake (lake-repair.ts). Returns the answers read.
 */
export async function rederiveTables(lake: LakeConnection, dataDir: string, options: Pick<RebuildOptions, 'batchAnswers' | 'logger'> = {}): Promise<number> {
  const { connection } = lake;
  const total = await scalarOf(connection, 'SELECT count(*) FROM raw_answers');
  const step = options.batchAnswers ?? 5000;
  const folder = loadPackageFolder(dataDir, 0);
  await inTransaction(connection, async () => {
    for (const table of STAGED_TABLES) await connection.run(`DELETE FROM ${table}`);
    // In the order they were loaded: each step as a load's batch was, so merges meet rows as the loads did.
    for (let offset = 0; offset < total; offset += step) {
      const reader = await connection.runAndReadAll(`SELECT landing, answer::VARCHAR FROM raw_answers ORDER BY loaded_at, landing LIMIT ${step} OFFSET ${offset}`);
      await normalize(lake, dataDir, packageOf(folder, reader.getRows().map(([key, answer]) => ({ key: String(key), text: String(answer) }))));
      await mergeStaged(connection);
      options.logger?.info({ answers: Math.min(total, offset + step), of: total }, 'rebuilt from raw answers');
    }
  });
  rmSync(folder, { recursive: true, force: true });
  return total;
}

/**
 * A load package of raw answers. Each is the line the load packaged (its key as `_landing`, its data
 * last), so it goes back into the package file of its shape as it is.
 */
function packageOf(folder: string, answers: { key: string; text: string }[]): LoadPackage {
  rmSync(folder, { recursive: true, force: true });
  mkdirSync(folder, { recursive: true });
  const lines: Record<LandingShape, string[]> = { list: [], object: [], run: [], media: [] };
  // A raw answer's text is the line its load packaged: its data last, as landingShape reads it.
  for (const { key, text } of answers) lines[landingShape(key, Buffer.from(text)) ?? 'object'].push(text);
  const files = loadPackageFiles(folder);
  for (const shape of Object.keys(lines) as LandingShape[]) writeFileSync(files[shape], lines[shape].map((line) => `${line}\n`).join(''));
  return { files, keys: [], answers: [], rejected: [], drift: [] };
}
