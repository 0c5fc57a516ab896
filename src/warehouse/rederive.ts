/**
 * Every staged table derived again from the answers the lake keeps (`raw_answers`), through the
 * same normalize and merge stages a load uses: what `harvester rebuild` (rebuild.ts) and the repair
 * of a damaged lake (lake-repair.ts) both do. Apart from rebuild.ts, which repairs the lake first,
 * so that the repair can use it without the two importing each other.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import type { Logger } from '../logger.js';
import { loadPackageFolder } from '../store/layout.js';
import { inTransaction, scalarOf } from './duckdb.js';
import { lakeInlines, type LakeConnection } from './lake.js';
import type { LoadPackage } from './extract.js';
import type { LandingShape } from './raw-columns.js';
import { correctRunsByLateRecords } from './journal-archive.js';
import { landingShape, loadPackageFiles } from './landing-shape.js';
import { mergeStaged } from './merge.js';
import { normalize } from './normalize.js';
import { STAGED_TABLES } from './schema.js';

/**
 * Derives every staged table again from `raw_answers`, in one transaction of the open writer
 * `lake`: the rebuild, and the repair of a damaged lake (lake-repair.ts). Returns the answers read.
 */
export async function rederiveTables(lake: LakeConnection, dataDir: string, options: { batchAnswers?: number; logger?: Logger } = {}): Promise<number> {
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
      await mergeStaged(connection, lakeInlines(dataDir));
      options.logger?.info({ answers: Math.min(total, offset + step), of: total }, 'rebuilt from raw answers');
    }
    // The runs' statuses gave their figures as each run knew them at its end: corrected again by the late records.
    await correctRunsByLateRecords(connection);
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
