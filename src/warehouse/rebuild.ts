/**
 * A rebuild: the warehouse's tables derived again from the answers the lake keeps (`raw_answers`),
 * through the same normalize and merge stages a load uses, in one transaction (one snapshot:
 * readers see the old tables or the new, never a mix). What the loads made and what a rebuild makes
 * are the same rows; a column added since is filled from answers already paid for. The load's own
 * records (`loaded_landings`, `raw_answers`, `loaded_segments`) are kept as they are.
 */
import type { DuckDBInstance } from '@duckdb/node-api';
import type { Logger } from '../logger.js';
import { LocalStore, type Store } from '../store/store.js';
import { latestSnapshot, openLakeWriter } from './lake.js';
import { repairLake, type LakeRepair } from './lake-repair.js';
import { rederiveTables } from './rederive.js';
import { ensureSchema } from './schema-version.js';

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
