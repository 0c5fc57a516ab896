/**
 * Raw answers a damaged `raw_answers` file lost, loaded again from the segments still in the data
 * directory (lake-repair.ts, after the table was rewritten from its whole files). A run's segments
 * stay until the run is over and wholly in a lake commit on the disk (loader.ts), so the answers of
 * a run still going, or left for a retry, are found there; those of runs already cleared are not,
 * and stay reported as lost.
 *
 * Only `raw_answers` is written: the answers are read into a load package and staged as a load
 * stages them (extract.ts, normalize.ts), and the staged raw answers whose landing the lake records
 * as loaded (`loaded_landings`) but `raw_answers` lacks are inserted, one transaction. The tables
 * derived from them are not touched here: whole, they already hold those answers' rows; damaged,
 * they are derived again from the raw answers afterwards (rebuild.ts), which now include these.
 */
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../logger.js';
import { runFoldersWithAnswers } from '../store/answer-segments.js';
import { loadPackageFolder, parseSegmentFileName, runSegmentFolder, segmentId } from '../store/layout.js';
import { readSegment } from '../store/segment.js';
import { inTransaction, scalarOf } from './duckdb.js';
import { extract, type PendingAnswer } from './extract.js';
import type { LakeConnection } from './lake.js';
import { normalize } from './normalize.js';

/** The landings the lake records as loaded whose raw answer it does not have. */
const MISSING = 'SELECT landing FROM loaded_landings EXCEPT SELECT landing FROM raw_answers';

/** Every answer framed in the data directory's segments whose key is in `keys`, where it is. */
async function framedAnswers(dataDir: string, keys: ReadonlySet<string>): Promise<PendingAnswer[]> {
  const answers: PendingAnswer[] = [];
  for (const runFolder of (await runFoldersWithAnswers(dataDir)).segments) {
    const folder = runSegmentFolder(dataDir, runFolder);
    for (const name of readdirSync(folder).sort()) {
      if (!parseSegmentFileName(name)) continue;
      const file = join(folder, name);
      const { header, frames } = await readSegment(file);
      if (!header) continue;
      for (const frame of frames) {
        if (keys.has(frame.key)) answers.push({ key: frame.key, file, offset: frame.textOffset, length: frame.textLength, segment: { id: segmentId(runFolder, name), runId: header.run_id, end: frame.end } });
      }
    }
  }
  return answers;
}

/**
 * Loads again into `raw_answers` the answers it lacks that the segments still hold; returns how many.
 * A failure to read them is logged and counts none: what was not loaded again stays reported as lost.
 */
export async function reloadRawAnswersFromSegments(lake: LakeConnection, dataDir: string, logger?: Logger): Promise<number> {
  const { connection } = lake;
  const missing = new Set((await connection.runAndReadAll(MISSING)).getRows().map(([landing]) => String(landing)));
  if (missing.size === 0) return 0;
  const answers = await framedAnswers(dataDir, missing);
  if (answers.length === 0) return 0;
  const folder = loadPackageFolder(dataDir, 0);
  try {
    const loadPackage = await extract(answers, folder);
    await normalize(lake, dataDir, loadPackage);
    return await inTransaction(connection, async () => {
      await connection.run(`CREATE OR REPLACE TEMP TABLE reloaded_raw_answers AS SELECT * FROM stage_raw_answers WHERE landing IN (${MISSING})`);
      const reloaded = await scalarOf(connection, 'SELECT count(*) FROM reloaded_raw_answers');
      await connection.run('INSERT INTO raw_answers SELECT *, now() FROM reloaded_raw_answers');
      await connection.run('DROP TABLE reloaded_raw_answers');
      return reloaded;
    });
  } catch (error) {
    logger?.warn({ err: (error as Error).message }, 'the raw answers still in segments could not be loaded again: they are reported as lost');
    return 0;
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}
