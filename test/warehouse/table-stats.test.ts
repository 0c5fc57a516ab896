/**
 * Every table of the lake has a row in DuckLake's table stats (issue 40): DuckLake 1.5.5 does not
 * cache the absence of a table's stats, so a statement on a table that never held a row asks the
 * catalog once per column it names (38 ms a SELECT of empty harvest_runs, 3 ms with stats). A new
 * lake gets them as it is made; a lake made by an earlier version gets them at its first load after
 * the upgrade, without losing a row of a table that has rows but no stats.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { lakeCatalogFile } from '../../src/store/layout.js';
import { openLakeWriter } from '../../src/warehouse/lake.js';
import { forgetCheckedSchemas, loadLandings, makeLake } from '../../src/warehouse/loader.js';
import { LocalStore } from '../../src/store/store.js';

/** Runs SQL on the lake's SQLite catalog itself (Python's sqlite3), as an earlier version could have left it. */
function catalogSql(dataDir: string, sql: string): string {
  const script = 'import sqlite3, sys, json\nc = sqlite3.connect(sys.argv[1])\nrows = c.execute(sys.argv[2]).fetchall()\nc.commit()\nprint(json.dumps(rows))';
  return execFileSync('python3', ['-c', script, lakeCatalogFile(dataDir), sql], { encoding: 'utf8' }).trim();
}

const tablesWithoutStats = (dataDir: string) =>
  JSON.parse(catalogSql(dataDir, 'SELECT table_name FROM ducklake_table WHERE end_snapshot IS NULL AND table_id NOT IN (SELECT table_id FROM ducklake_table_stats) ORDER BY 1')) as string[][];

async function rowCounts(dataDir: string, tables: string[]): Promise<Record<string, number>> {
  const lake = await openLakeWriter(dataDir, 10_000);
  try {
    const counts: Record<string, number> = {};
    for (const table of tables) counts[table] = Number((await lake.connection.runAndReadAll(`SELECT count(*) FROM ${table}`)).getRows()[0]?.[0]);
    return counts;
  } finally {
    await lake.close();
  }
}

describe('DuckLake table stats for every table', () => {
  it('a new lake has a stats row for each of its tables, and no row in any', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'table-stats-'));
    await makeLake(dataDir, { store: new LocalStore(dataDir) });
    expect(tablesWithoutStats(dataDir)).toEqual([]);
    const tables = (JSON.parse(catalogSql(dataDir, 'SELECT table_name FROM ducklake_table WHERE end_snapshot IS NULL ORDER BY 1')) as string[][]).map(([name]) => name!);
    expect(tables.length).toBeGreaterThan(15);
    const counts = await rowCounts(dataDir, tables);
    expect(Object.values(counts).every((rows) => rows === 0)).toBe(true);
  }, 60_000);

  it('a lake of an earlier version gets them at its next load, and a table with rows but no stats keeps its rows', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'table-stats-old-'));
    const store = new LocalStore(dataDir);
    await makeLake(dataDir, { store });
    const lake = await openLakeWriter(dataDir, 10_000);
    try {
      await lake.connection.run(`INSERT INTO schema_drift (run_id, endpoint, field_path, first_seen_at, last_seen_at, answers) VALUES ('run-old', 'tiktok/stats', '$.extra', now(), now(), 1)`);
      // As an earlier version left it: its mark, and no stats for two tables, one of them holding a row.
      await lake.connection.run(`COMMENT ON TABLE loaded_landings IS 'social-harvester schema 0000000000000000'`);
    } finally {
      await lake.close();
    }
    catalogSql(dataDir, "DELETE FROM ducklake_table_stats WHERE table_id IN (SELECT table_id FROM ducklake_table WHERE table_name IN ('failed_calls', 'schema_drift') AND end_snapshot IS NULL)");
    expect(tablesWithoutStats(dataDir)).toEqual([['failed_calls'], ['schema_drift']]);
    forgetCheckedSchemas();
    await loadLandings(dataDir, { store });
    // The empty table got its stats; the one with a row was left as it was, its row kept.
    expect(tablesWithoutStats(dataDir)).toEqual([['schema_drift']]);
    expect(await rowCounts(dataDir, ['failed_calls', 'schema_drift'])).toEqual({ failed_calls: 0, schema_drift: 1 });
  }, 60_000);
});
