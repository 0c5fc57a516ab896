/**
 * Mending a lake whose catalog names files that are not whole (lake-health.ts found them as the
 * writer attached). Two steps, each its own transaction:
 *
 * 1. Each damaged table is rewritten from its whole files alone: its rows are read with the damaged
 *    data files left out by name (DuckLake prunes files by `filename` before opening them; a data
 *    file whose delete file is damaged is left out too, since which of its rows are deleted is
 *    unknown), the table is dropped and made again by the schema's statements, and the rows go back.
 *    The rows of the files left out are counted from the catalog (rows less deleted rows): they
 *    are lost, unless step 2 brings them back.
 * 2. When a table derived from the answers (every staged table: items, item_metrics, api_calls, …)
 *    was damaged and `raw_answers` was not, every derived table is derived again from the raw
 *    answers (rebuild.ts), which brings their lost rows back: nothing of them is lost.
 *
 * Between them, when `raw_answers` was damaged, the raw answers it lost that the segments still in
 * the data directory hold are loaded again (lake-reload.ts); when that brings every lost one back,
 * `raw_answers` counts as whole for step 2.
 *
 * What no whole file keeps (rows of `raw_answers` no segment holds any more, `loaded_landings`,
 * `loaded_segments`, `media_files`, `call_journal`, `schema_drift`, or of derived tables when
 * `raw_answers` lost rows) is reported as lost, table by table, with its rows: never dropped
 * without a word.
 */
import type { Logger } from '../logger.js';
import { inTransaction, sqlString } from './duckdb.js';
import { DamagedLakeError, referencedLakeFiles, type DamagedLakeFile, type LakeFile } from './lake-health.js';
import { lakeLocation, type LakeConnection } from './lake.js';
import { reloadRawAnswersFromSegments } from './lake-reload.js';
import { repairLines, type LakeRepair } from './lake-repair-report.js';
import { rederiveTables } from './rederive.js';
import { STAGED_TABLES, TABLES_DDL } from './schema.js';

/** What a repair found and did. */
export type { LakeRepair };

const DERIVED = new Set<string>(STAGED_TABLES);

/**
 * Repairs the damaged files `lake` found when it attached (its `damaged`); nothing when there are
 * none. `rebuild: false` leaves step 2 to the caller (harvester rebuild, which derives every table
 * again anyway). Logs what it did and what was lost, at warn.
 */
export async function repairLake(lake: LakeConnection, dataDir: string, options: { logger?: Logger | undefined; rebuild?: boolean } = {}): Promise<LakeRepair | undefined> {
  const damaged = lake.damaged;
  if (damaged.length === 0) return undefined;
  options.logger?.warn({ damaged: damaged.map(({ table, kind, path, problem }) => ({ table, kind, path, problem })) }, 'the lake names files that are not whole: repairing');
  const lost = await rewriteWithoutDamaged(lake, dataDir, damaged);
  const reloaded = damaged.some((file) => file.table === 'raw_answers') ? await reloadRawAnswersFromSegments(lake, dataDir, options.logger) : 0;
  // One row of raw_answers per answer: those loaded again are not lost.
  for (const entry of lost) if (entry.table === 'raw_answers') entry.rows = Math.max(0, entry.rows - reloaded);
  const rawWhole = !lost.some((entry) => entry.table === 'raw_answers' && entry.rows > 0);
  const derivedDamaged = damaged.some((file) => DERIVED.has(file.table));
  const rebuild = rawWhole && (derivedDamaged || options.rebuild === false);
  if (rebuild && options.rebuild !== false) await rederiveTables(lake, dataDir, { logger: options.logger });
  const repair: LakeRepair = {
    damaged,
    rewritten: [...new Set(damaged.map((file) => file.table))],
    reloaded,
    rebuilt: rebuild,
    lost: lost.filter(({ table, rows }) => !(table === 'raw_answers' && rows === 0) && !(rebuild && DERIVED.has(table))),
  };
  if (repair.lost.length > 0) options.logger?.warn({ lost: repair.lost }, 'the lake lost rows no whole file kept');
  return repair;
}

/** Step 1 (see the module's comment): returns the rows each table lost with the files left out. */
async function rewriteWithoutDamaged(lake: LakeConnection, dataDir: string, damaged: readonly DamagedLakeFile[]): Promise<Array<{ table: string; rows: number; files: string[] }>> {
  const { connection } = lake;
  const referenced = await referencedLakeFiles(connection, lakeLocation(dataDir).dataPath);
  const lost: Array<{ table: string; rows: number; files: string[] }> = [];
  const tables = [...new Set(damaged.map((file) => file.table))];
  await inTransaction(connection, async () => {
    for (const table of tables) {
      const leftOut = dataFilesLeftOut(table, damaged, referenced);
      // With every data file left out, nothing is read: DuckDB opened a file pruned by name when it was the table's only one.
      const whole = referenced.filter((file) => file.table === table && file.kind === 'data').length > leftOut.length;
      if (whole) await connection.run(`CREATE OR REPLACE TEMP TABLE repair_whole_rows AS SELECT * FROM ${table} WHERE filename NOT IN (${leftOut.map(({ path }) => sqlString(path)).join(', ')})`);
      await connection.run(`DROP TABLE ${table}`);
      // The schema's statements make again what is missing (this table), and leave the rest as it is.
      for (const statement of TABLES_DDL) await connection.run(statement);
      if (whole) {
        await connection.run(`INSERT INTO ${table} BY NAME SELECT * FROM repair_whole_rows`);
        await connection.run('DROP TABLE repair_whole_rows');
      }
      lost.push({ table, rows: leftOut.reduce((sum, file) => sum + file.rows, 0), files: leftOut.map(({ path }) => path) });
    }
  });
  return lost;
}

/**
 * The data files of `table` to leave out: the damaged ones, and those whose delete file is damaged,
 * each with its live rows (its rows less its deleted rows, as the catalog counts them).
 */
function dataFilesLeftOut(table: string, damaged: readonly DamagedLakeFile[], referenced: readonly LakeFile[]): Array<{ path: string; rows: number }> {
  const ids = new Set(damaged.filter((file) => file.table === table).map((file) => file.dataFileId));
  const ofTable = referenced.filter((file) => file.table === table && ids.has(file.dataFileId));
  const deleted = new Map(ofTable.filter((file) => file.kind === 'delete').map((file) => [file.dataFileId, file.rows]));
  return ofTable.filter((file) => file.kind === 'data').map((file) => ({ path: file.path, rows: file.rows - (deleted.get(file.dataFileId) ?? 0) }));
}

/** What a repair says to the user: each damaged file with its table, what was rebuilt or loaded again, and what was lost. */
export function repairReport(repair: LakeRepair | undefined): string {
  if (!repair) return '';
  const [head, ...rest] = repairLines(repair);
  return `${head}:\n${rest.map((line) => `  ${line}\n`).join('')}`;
}

/**
 * A read of the lake that a damaged lake does not stop: when `read` is refused with a
 * DamagedLakeError, `repair` (a writer's open, which repairs: a load, makeLake) runs and `read` is
 * tried once more; a lake still damaged after it throws that read's DamagedLakeError, naming its files.
 */
export async function readingRepaired<T>(read: () => Promise<T>, repair: (damage: DamagedLakeError) => Promise<unknown>): Promise<T> {
  try {
    return await read();
  } catch (error) {
    if (!(error instanceof DamagedLakeError)) throw error;
    await repair(error);
    return read();
  }
}
