/**
 * What a repair of a damaged lake says (lake-repair.ts), line by line: the same lines in `harvester
 * maintain`, `load` and `rebuild`, in a run's summary and in `harvester show`. Kept apart from the
 * repair itself, which loads DuckDB: a worker's activities and the CLI's run commands format these
 * lines without loading it.
 */
import type { DamagedLakeFile } from './lake-health.js';

/** What a repair of a damaged lake did (lake-repair.ts's repairLake). */
export interface LakeRepair {
  damaged: DamagedLakeFile[];
  /** Tables rewritten from their whole files. */
  rewritten: string[];
  /** Raw answers a damaged `raw_answers` file lost that were loaded again from the segments still in the data directory. */
  reloaded: number;
  /** Whether the derived tables were derived again from the raw answers. */
  rebuilt: boolean;
  /** Rows no whole file keeps, by table (a table rebuilt from the raw answers lost none). */
  lost: Array<{ table: string; rows: number; files: string[] }>;
}

const plural = (count: number, word: string) => `${count} ${word}${count === 1 ? '' : 's'}`;

/**
 * The first line says that the lake was damaged and which tables were rewritten; then one line per
 * damaged file (table, kind, path, what was wrong), the raw answers loaded again, the rebuild, and
 * each table's rows lost, with their count.
 */
export function repairLines(repair: LakeRepair): string[] {
  return [
    `the warehouse was damaged, and was repaired (${repair.rewritten.join(', ')} rewritten from their whole files)`,
    ...repair.damaged.map((file) => `table ${file.table}: ${file.kind} file ${file.path} was ${file.problem}`),
    ...(repair.reloaded > 0 ? [`raw_answers: ${plural(repair.reloaded, 'answer')} loaded again from the segments still in the data directory`] : []),
    ...(repair.rebuilt ? ['the tables derived from the raw answers were rebuilt from them'] : []),
    ...repair.lost.map(({ table, rows, files }) => `LOST: ${rows} rows of ${table} (in ${plural(files.length, 'file')} no whole copy keeps)`),
  ];
}
