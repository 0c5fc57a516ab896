import type { Json } from '@duckdb/node-api';
import { Command, Option } from 'commander';
import { dataDirFromEnv } from '../../config/environment.js';
import { storeFromEnvironment } from '../../store/store-from-environment.js';
import { csvLine } from '../../text/csv.js';
import { exportParquet } from '../../warehouse/export.js';
import { loadLandings } from '../../warehouse/loader.js';
import { DEFAULT_KEEP_SNAPSHOTS_HOURS, maintainLake } from '../../warehouse/maintenance.js';
import { rebuildLake } from '../../warehouse/rebuild.js';
import { restoreMediaCopies } from '../../warehouse/media-copies.js';
import { mediaFolder } from '../../store/layout.js';
import { quarantineLine } from '../../store/quarantine.js';
import { lakeLocation } from '../../warehouse/lake.js';
import { repairReport } from '../../warehouse/lake-repair.js';
import { streamWarehouseQuery, type QuerySink, type QueryStop, type StreamedQuery } from '../../warehouse/query.js';
import { cliLogger } from '../context.js';
import { columnWidths, textTable } from '../text-table.js';
import { numberBetween, wholeNumber } from '../options.js';

/** `harvester query`'s exit code when --max-rows or --timeout stopped it (the rows before stay printed). */
export const QUERY_LIMIT_EXIT_CODE = 4;
const DEFAULT_MAX_ROWS = 100_000;
const DEFAULT_TIMEOUT_SECONDS = 60;
/** Rows per page of the table format: the first page sets the column widths. */
const TABLE_PAGE_ROWS = 1000;
const DEFAULT_MAX_CELL_WIDTH = 60;

type QueryFormat = 'table' | 'csv' | 'json';

export function queryCommand(): Command {
  return new Command('query')
    .description('Run SQL against the warehouse, read-only (it never locks harvests or other readers out)')
    .argument('<sql>', 'the query')
    .addOption(new Option('--format <format>', 'output').choices(['table', 'csv', 'json']).default('table'))
    .addOption(new Option('--max-rows <n>', 'print at most this many rows; 0 for no limit').argParser(wholeNumber(0)).default(DEFAULT_MAX_ROWS))
    .addOption(new Option('--timeout <seconds>', 'interrupt the query after this long; 0 for no limit').argParser(numberBetween(0, 1_000_000)).default(DEFAULT_TIMEOUT_SECONDS))
    .addOption(new Option('--max-width <n>', 'table format: cut longer cells to this many characters, marked …; 0 for no limit').argParser(wholeNumber(0)).default(DEFAULT_MAX_CELL_WIDTH))
    .addHelpText(
      'after',
      `
Reads the warehouse, <data dir>/lake (HARVESTER_DATA_DIR, default ./data), at its latest snapshot. Tables: docs/data-dictionary.md.

Rows are printed as DuckDB produces them, in every format, so memory stays flat. A query with more rows
than --max-rows prints that many, and one that runs longer than --timeout is interrupted; either way the
rows printed so far stay printed (JSON still closes its array), stderr names the limit and the flag that
raises it, and the exit code is ${QUERY_LIMIT_EXIT_CODE}.
The table format takes its column widths from the first ${TABLE_PAGE_ROWS} rows, and prints the header again
above the rows where a wider cell widens a column. It cuts a cell longer than --max-width characters,
ending it with …, and says so on stderr: --format csv or json, or --max-width 0, print whole values.
JSON prints a BIGINT (or HUGEINT) as a number within ±(2^53 - 1), which a double holds exactly, and as a
string of its digits beyond; DECIMAL values and timestamps as strings.

Examples:
  $ harvester query "SELECT platform, count(*) FROM items GROUP BY platform"
  $ harvester query "SELECT * FROM top_items_per_account WHERE rank_in_account = 1" --format csv > top.csv
  $ harvester query "SELECT * FROM item_metrics" --format csv --max-rows 0 --timeout 0 > metrics.csv`,
    )
    .action(async (sql: string, options: { format: QueryFormat; maxRows: number; timeout: number; maxWidth: number }) => {
      // A reader that goes away (`| head`) ends the query quietly; any other write error is reported.
      const readerGone = new AbortController();
      let writeError: NodeJS.ErrnoException | undefined;
      const onWriteError = (error: NodeJS.ErrnoException) => {
        writeError ??= error;
        readerGone.abort();
      };
      process.stdout.on('error', onWriteError);
      const output = queryOutput(options.format, options.maxWidth);
      try {
        const result = await streamWarehouseQuery(dataDirFromEnv(), sql, output, { maxRows: options.maxRows, timeoutMs: options.timeout > 0 ? Math.max(1, Math.round(options.timeout * 1000)) : 0, signal: readerGone.signal });
        if (writeError) {
          if (writeError.code === 'EPIPE') return;
          throw writeError;
        }
        await output.end(result);
        if (result.stoppedBy) {
          process.stderr.write(`harvester: ${limitMessage(result.stoppedBy, result.rows)}\n`);
          process.exitCode = QUERY_LIMIT_EXIT_CODE;
        }
      } finally {
        process.stdout.off('error', onWriteError);
      }
    });
}

/** What stopped a query, the limit's value, and the flag that raises it. */
function limitMessage(stop: QueryStop, printed: number): string {
  const rows = `${printed} row${printed === 1 ? '' : 's'}`;
  if (stop.limit === 'rows') {
    return `stopped at the row limit: printed the first ${rows} and there are more (--max-rows ${stop.maxRows}); raise it with --max-rows <n>, or --max-rows 0 for no limit`;
  }
  return `stopped at the time limit: the query was interrupted after ${seconds(stop.timeoutMs)} s (--timeout ${seconds(stop.timeoutMs)}) with ${rows} printed; raise it with --timeout <seconds>, or --timeout 0 for no limit`;
}

function seconds(ms: number): string {
  return String(ms / 1000);
}

/** Writes to stdout, waiting when its buffer is full (a pipe whose reader is slower than DuckDB). */
async function print(text: string): Promise<void> {
  if (process.stdout.write(text)) return;
  await new Promise<void>((resolve) => {
    const done = () => {
      process.stdout.off('drain', done);
      process.stdout.off('error', done);
      process.stdout.off('close', done);
      resolve();
    };
    process.stdout.once('drain', done);
    process.stdout.once('error', done);
    process.stdout.once('close', done);
  });
}

interface QueryOutput extends QuerySink {
  /** After the last row (also when a limit stopped the query). */
  end(result: StreamedQuery): Promise<void>;
}

function queryOutput(format: QueryFormat, maxWidth: number): QueryOutput {
  if (format === 'csv') return csvOutput();
  if (format === 'json') return jsonOutput();
  return tableOutput(maxWidth);
}

/** CSV, CRLF line ends, a header line first. */
function csvOutput(): QueryOutput {
  return {
    columns: (columns) => print(`${csvLine(columns.names)}\r\n`),
    rows: (rows) => print(`${rows.map(csvLine).join('\r\n')}\r\n`),
    end: async () => {},
  };
}

/** One JSON array of row objects, as `JSON.stringify(rows, null, 2)` prints it, written a batch at a time. */
function jsonOutput(): QueryOutput {
  let keys: string[] = [];
  let started = false;
  let columns = false;
  return {
    columns: (query) => {
      keys = query.keys;
      columns = true;
    },
    rows: (rows) => {
      const elements = rows.map((row) => {
        const object: Record<string, Json> = {};
        for (let index = 0; index < keys.length; index++) object[keys[index]!] = row[index] ?? null;
        return `  ${JSON.stringify(object, null, 2).replaceAll('\n', '\n  ')}`;
      });
      const text = `${started ? ',\n' : '[\n'}${elements.join(',\n')}`;
      started = true;
      return print(text);
    },
    // A query interrupted before it had columns printed nothing and prints nothing.
    end: async () => print(started ? '\n]\n' : columns ? '[]\n' : ''),
  };
}

/**
 * An aligned plain-text table, as `textTable` prints it, but a page of rows at a time: the widths
 * come from the header and the first page; a later page with a wider cell widens its column and
 * prints the header again above itself, so every block is aligned and no row waits for the last.
 */
function tableOutput(maxWidth: number): QueryOutput {
  let header: string[] = [];
  let widths: number[] | undefined;
  let page: string[][] = [];
  let cutCells = 0;
  const layout = { maxCellWidth: maxWidth > 0 ? maxWidth : undefined };
  const cell = (value: Json | undefined) => (value === null || value === undefined ? '' : typeof value === 'object' ? JSON.stringify(value) : String(value));
  const flush = async () => {
    if (widths !== undefined && page.length === 0) return;
    const pageWidths = columnWidths(header, page, layout);
    const widened = widths === undefined || pageWidths.some((width, index) => width > widths![index]!);
    const separator = widths !== undefined && widened ? '\n' : '';
    widths = widths === undefined ? pageWidths : pageWidths.map((width, index) => Math.max(width, widths![index]!));
    const text = textTable(header, page, { ...layout, widths, header: widened });
    page = [];
    if (text !== '') await print(`${separator}${text}\n`);
  };
  return {
    columns: (columns) => {
      header = columns.names;
      cutCells += header.filter((name) => layout.maxCellWidth !== undefined && name.length > layout.maxCellWidth).length;
    },
    rows: async (rows) => {
      for (const row of rows) {
        const cells = header.map((_, index) => cell(row[index]));
        if (layout.maxCellWidth !== undefined) for (const text of cells) if (text.length > layout.maxCellWidth) cutCells++;
        page.push(cells);
        if (page.length === TABLE_PAGE_ROWS) await flush();
      }
    },
    end: async (result) => {
      if (!result.columns) return;
      await flush();
      const stopped = result.stoppedBy === undefined ? '' : result.stoppedBy.limit === 'rows' ? `; stopped by --max-rows ${result.stoppedBy.maxRows}` : `; stopped by --timeout ${seconds(result.stoppedBy.timeoutMs)}`;
      await print(`(${result.rows} row${result.rows === 1 ? '' : 's'}${stopped})\n`);
      // On stderr: the table on stdout stays the rows and nothing else.
      if (cutCells > 0) process.stderr.write(`harvester: ${cutCells} cell${cutCells === 1 ? ' was' : 's were'} cut to ${maxWidth} characters, marked …; print whole values with --format csv, --format json or --max-width 0\n`);
    },
  };
}

export function exportCommand(): Command {
  return new Command('export')
    .description('Write every table as Parquet, hive-partitioned by platform and date')
    .requiredOption('--out <dir>', 'output folder; each table goes to <dir>/<table>/ and replaces an earlier export')
    .option('--snapshot <n>', 'export the warehouse as this snapshot left it (SELECT * FROM ducklake_snapshots(\'lake\') lists them); default: the latest', wholeNumber(0))
    .addHelpText(
      'after',
      `
One file per partition, or files of about 64 MB for a larger one; an empty table gets a file with its
columns and no rows; JSON columns (api_calls.params) are written as text.`,
    )
    .addHelpText('after', '\nExample:\n  $ harvester export --out exports/2026-11-21\n  $ duckdb -c "SELECT count(*) FROM read_parquet(\'exports/2026-11-21/items/**/*.parquet\', hive_partitioning=true)"')
    .action(async (options: { out: string; snapshot?: number }) => {
      const result = await exportParquet(dataDirFromEnv(), options.out, options.snapshot === undefined ? {} : { snapshot: options.snapshot });
      for (const [table, rows] of Object.entries(result.tables)) process.stdout.write(`${table}\t${rows}\n`);
      const files = Object.values(result.files).reduce((sum, count) => sum + count, 0);
      process.stderr.write(`exported ${Object.keys(result.tables).length} tables in ${files} files to ${result.directory} (snapshot ${result.snapshot})\n`);
    });
}

export function loadCommand(): Command {
  return new Command('load')
    .description('Load landed pages into the warehouse now (harvests do this themselves after each run)')
    .addHelpText(
      'after',
      '\nA landing that cannot be loaded is moved to <data>/quarantine/ (same path as under landing/) with a\n.reason file beside it, and the rest loads; the command then exits 3. Move it back under landing/ to\nload it again (`harvester retry <run>` puts back those of a run). Each batch commits one snapshot of the lake; a warehouse.duckdb of an older version\nis moved into the lake on the first load (renamed *.migrated).\n\nExample:\n  $ harvester load',
    )
    .action(async () => {
      const dataDir = dataDirFromEnv();
      const store = await storeFromEnvironment(dataDir);
      const result = await loadLandings(dataDir, { logger: cliLogger(), store }).finally(() => store.close());
      process.stderr.write(repairReport(result.repair));
      const quarantined = result.quarantined.length > 0 ? `; ${result.quarantined.length} quarantined (not loaded)` : '';
      process.stderr.write(`loaded ${result.landingsLoaded} landings (${result.rowsLoaded} rows) in ${result.batches} batches, ${result.durationMs} ms${quarantined}; warehouse: ${lakeLocation(dataDir).description} at snapshot ${result.snapshot}\n`);
      for (const landing of result.quarantined) process.stderr.write(`quarantined ${quarantineLine(landing)}\n`);
      // Loaded what could be loaded, but something was set aside: not a plain success.
      if (result.quarantined.length > 0) process.exitCode = 3;
    });
}

export function maintainCommand(): Command {
  return new Command('maintain')
    .description('Compact the warehouse: merge small data files, expire old snapshots, delete files unread since the last maintenance')
    .option('--keep-hours <hours>', 'keep snapshots this many hours for time travel', wholeNumber(0), DEFAULT_KEEP_SNAPSHOTS_HOURS)
    .option('--keep-raw-days <days>', 'delete raw answers loaded (and journal records archived) more than this many days ago (default: keep every answer, so a rebuild can use them)', wholeNumber(0))
    .option('--restore-media', 'also write back, from the lake, the copies of media files missing from <data dir>/media (after a machine crash)')
    .addHelpText(
      'after',
      '\nLoads write small files; each run\'s final load also maintains the lake once a day, so this command is\nfor now, or for another window. Readers are never stopped; a load waits until it is done.\n\nExample:\n  $ harvester maintain --keep-hours 24',
    )
    .action(async (options: { keepHours: number; keepRawDays?: number; restoreMedia?: boolean }) => {
      const dataDir = dataDirFromEnv();
      if (options.restoreMedia) {
        const media = await restoreMediaCopies(dataDir);
        process.stderr.write(`media: ${media.restored} of ${media.files} copies written back from the lake into ${mediaFolder(dataDir)}\n`);
      }
      const store = await storeFromEnvironment(dataDir);
      const result = await maintainLake(dataDir, { keepSnapshotsHours: options.keepHours, keepRawAnswersDays: options.keepRawDays, store }).finally(() => store.close());
      process.stderr.write(repairReport(result.repair));
      const expired = options.keepRawDays === undefined ? '' : `${result.rawAnswersExpired} raw answers and ${result.journalRecordsExpired} journal records older than ${options.keepRawDays} days deleted; `;
      process.stderr.write(
        `${duplicatesLine(result.duplicatesRemoved)}${expired}data files ${result.dataFilesBefore} -> ${result.dataFilesAfter}; snapshots ${result.snapshotsBefore} -> ${result.snapshotsAfter}; ${result.filesDeleted} unread files deleted; ${result.orphanedFilesRemoved?.length ?? 0} files no catalog row named (left by a crash) removed; ${result.durationMs} ms; warehouse: ${lakeLocation(dataDir).description} at snapshot ${result.snapshot}\n`,
      );
    });
}

/** What maintenance repaired, when it did: rows of a key kept twice by the DuckLake MERGE bug. */
function duplicatesLine(removed: Record<string, number>): string {
  const repaired = Object.entries(removed).filter(([, rows]) => rows > 0);
  return repaired.length === 0 ? '' : `removed duplicate rows (each key's latest version kept): ${repaired.map(([table, rows]) => `${table} ${rows}`).join(', ')}; `;
}

export function rebuildCommand(): Command {
  return new Command('rebuild')
    .description('Derive the warehouse\'s tables again from the raw answers the lake keeps (raw_answers), in one snapshot')
    .addHelpText(
      'after',
      '\nEvery answer a harvest paid for is kept in the lake, as it came. After an upgrade that adds a column, a\nrebuild fills it from those answers: nothing is bought again. Readers see the old tables or the new, never\na mix; a load waits until it is done.\n\nExample:\n  $ harvester rebuild',
    )
    .action(async () => {
      const dataDir = dataDirFromEnv();
      const store = await storeFromEnvironment(dataDir);
      const result = await rebuildLake(dataDir, { store }).finally(() => store.close());
      process.stderr.write(repairReport(result.repair));
      process.stderr.write(`rebuilt the tables from ${result.answers} raw answers in ${result.durationMs} ms; warehouse: ${lakeLocation(dataDir).description} at snapshot ${result.snapshot}\n`);
    });
}
