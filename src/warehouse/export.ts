import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { closeDatabase, openDatabase, sqlString } from './duckdb.js';
import { warehousePath } from './loader.js';

/**
 * How each table is partitioned on export: hive-style by platform and date, the date being the
 * column that says when the row happened. Tables without a platform of their own derive it (api
 * calls) or go by date alone (harvest runs); transcript segments go by platform alone.
 */
const PARTITIONS: Record<string, { platform?: string; date?: string }> = {
  accounts: { platform: 'platform', date: 'last_seen_at' },
  account_metrics: { platform: 'platform', date: 'observed_at' },
  items: { platform: 'platform', date: 'coalesce(posted_at, first_seen_at)' },
  item_metrics: { platform: 'platform', date: 'observed_at' },
  comments: { platform: 'platform', date: 'coalesce(posted_at, first_seen_at)' },
  search_hits: { platform: 'platform', date: 'observed_at' },
  transcripts: { platform: 'platform', date: 'fetched_at' },
  transcript_segments: { platform: 'platform' },
  summaries: { platform: 'platform', date: 'fetched_at' },
  downloads: { platform: 'platform', date: 'observed_at' },
  api_calls: { platform: "split_part(endpoint, '/', 1)", date: 'called_at' },
  harvest_runs: { date: 'started_at' },
};

export interface ExportResult {
  directory: string;
  tables: Record<string, number>;
}

/** Writes every table as Parquet under `outDir/<table>/platform=…/date=…/`, replacing earlier exports. */
export async function exportParquet(dataDir: string, outDir: string): Promise<ExportResult> {
  const path = warehousePath(dataDir);
  if (!existsSync(path)) throw new Error(`no warehouse at ${path} yet: run a harvest (or a load) first`);
  const directory = resolve(outDir);
  mkdirSync(directory, { recursive: true });
  const db = await openDatabase(path, { readOnly: true });
  const tables: Record<string, number> = {};
  try {
    for (const [table, partition] of Object.entries(PARTITIONS)) {
      const extra = [
        ...(partition.platform && partition.platform !== 'platform' ? [`${partition.platform} AS platform`] : []),
        // Dates are UTC days, whatever the session's time zone.
        ...(partition.date ? [`CAST(timezone('UTC', ${partition.date}) AS DATE) AS date`] : []),
      ];
      const by = [...(partition.platform ? ['platform'] : []), ...(partition.date ? ['date'] : [])];
      const select = `SELECT *${extra.length ? `, ${extra.join(', ')}` : ''} FROM ${table}`;
      const count = Number((await db.connection.runAndReadAll(`SELECT count(*) FROM ${table}`)).getRows()[0]?.[0] ?? 0);
      tables[table] = count;
      if (count === 0) continue;
      await db.connection.run(`COPY (${select}) TO ${sqlString(join(directory, table))} (FORMAT parquet, PARTITION_BY (${by.join(', ')}), OVERWRITE)`);
    }
  } finally {
    closeDatabase(db);
  }
  return { directory, tables };
}
