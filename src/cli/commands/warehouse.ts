import { Command, Option } from 'commander';
import { dataDirFromEnv } from '../../config/environment.js';
import { csvLine } from '../../text/csv.js';
import { textTable } from '../text-table.js';
import { exportParquet } from '../../warehouse/export.js';
import { loadLandings, warehousePath } from '../../warehouse/loader.js';
import { queryWarehouse } from '../../warehouse/query.js';
import { cliLogger } from '../context.js';

export function queryCommand(): Command {
  return new Command('query')
    .description('Run SQL against the warehouse, read-only (it never locks harvests or other readers out)')
    .argument('<sql>', 'the query')
    .addOption(new Option('--format <format>', 'output').choices(['table', 'csv', 'json']).default('table'))
    .addHelpText(
      'after',
      `
Reads <data dir>/warehouse.duckdb (HARVESTER_DATA_DIR, default ./data). Tables: docs/data-dictionary.md.

Examples:
  $ harvester query "SELECT platform, count(*) FROM items GROUP BY platform"
  $ harvester query "SELECT * FROM top_items_per_account WHERE rank_in_account = 1" --format csv > top.csv`,
    )
    .action(async (sql: string, options: { format: 'table' | 'csv' | 'json' }) => {
      const result = await queryWarehouse(dataDirFromEnv(), sql);
      if (options.format === 'json') process.stdout.write(`${JSON.stringify(result.rows, null, 2)}\n`);
      else if (options.format === 'csv') process.stdout.write(`${[result.columns, ...result.rows.map((row) => result.columns.map((column) => row[column]))].map(csvLine).join('\r\n')}\r\n`);
      else process.stdout.write(`${textTable(result.columns, result.rows.map((row) => result.columns.map((column) => (row[column] === null || row[column] === undefined ? '' : String(row[column])))), { maxCellWidth: 60 })}\n(${result.rows.length} row${result.rows.length === 1 ? '' : 's'})\n`);
    });
}

export function exportCommand(): Command {
  return new Command('export')
    .description('Write every table as Parquet, hive-partitioned by platform and date')
    .requiredOption('--out <dir>', 'output folder; each table goes to <dir>/<table>/ and replaces an earlier export')
    .addHelpText('after', '\nExample:\n  $ harvester export --out exports/2026-11-21\n  $ duckdb -c "SELECT count(*) FROM read_parquet(\'exports/2026-11-21/items/**/*.parquet\', hive_partitioning=true)"')
    .action(async (options: { out: string }) => {
      const result = await exportParquet(dataDirFromEnv(), options.out);
      for (const [table, rows] of Object.entries(result.tables)) process.stdout.write(`${table}\t${rows}\n`);
      process.stderr.write(`exported to ${result.directory}\n`);
    });
}

export function loadCommand(): Command {
  return new Command('load')
    .description('Load landed pages into the warehouse now (harvests do this themselves after each run)')
    .addHelpText(
      'after',
      '\nA landing that cannot be loaded is moved to <data>/quarantine/ (same path as under landing/) with a\n.reason file beside it, and the rest loads; the command then exits 3. Move it back under landing/ to\nload it again. A published warehouse.duckdb that cannot be read is made again.\n\nExample:\n  $ harvester load',
    )
    .action(async () => {
      const dataDir = dataDirFromEnv();
      const result = await loadLandings(dataDir, { logger: cliLogger() });
      const quarantined = result.quarantined.length > 0 ? `; ${result.quarantined.length} quarantined (not loaded)` : '';
      process.stderr.write(`loaded ${result.landingsLoaded} landings (${result.rowsLoaded} rows) in ${result.batches} batches, ${result.durationMs} ms${quarantined}; warehouse: ${warehousePath(dataDir)}\n`);
      for (const landing of result.quarantined) process.stderr.write(`quarantined ${landing.file}: ${landing.reason}\n`);
      // Loaded what could be loaded, but something was set aside: not a plain success.
      if (result.quarantined.length > 0) process.exitCode = 3;
    });
}
