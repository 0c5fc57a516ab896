import { DuckDBTypeId, JsonDuckDBValueConverter, StatementType, type DuckDBConnection, type DuckDBValueConverter, type Json } from '@duckdb/node-api';
import { lakeLocation, openLake } from './lake.js';
import { objectStorageSettings } from '../store/shared/shared-settings.js';

export interface QueryResult {
  columns: string[];
  rows: Record<string, unknown>[];
}

/**
 * Runs SQL against the warehouse's latest snapshot, attached read-only, with every file but the
 * lake's own data files switched off (and that setting locked): a query reads the warehouse's
 * tables and nothing else. It cannot write a file (COPY … TO), read another (read_text, read_csv),
 * attach a database (the lake's catalog read-write, say), or install an extension.
 *
 * The whole result is held in memory: for the program's own small queries. A query of the user's,
 * of any size, goes through `streamWarehouseQuery`.
 */
export async function queryWarehouse(dataDir: string, sql: string): Promise<QueryResult> {
  return withWarehouseQueries(dataDir, (query) => query(sql));
}

/**
 * Several queries as `queryWarehouse` runs each, on one connection to the warehouse: opening the
 * lake costs about 0.15 s (DuckDB and its extensions), a query a few milliseconds. They read one
 * snapshot only if `use` runs them in a transaction.
 */
export async function withWarehouseQueries<T>(dataDir: string, use: (query: (sql: string) => Promise<QueryResult>) => Promise<T>): Promise<T> {
  return withWarehouse(dataDir, undefined, (connection, check) =>
    use(async (sql) => {
      await check(sql);
      const reader = await connection.runAndReadAll(sql);
      return { columns: reader.columnNames(), rows: reader.getRowObjectsJson() as Record<string, unknown>[] };
    }),
  );
}

/** Limits on one streamed query; 0 (or absent) means no limit. */
export interface QueryLimits {
  /** Rows handed over at most; a query with more stops there. */
  maxRows?: number;
  /** Milliseconds from the start until the query is interrupted (DuckDB's `interrupt()`). */
  timeoutMs?: number;
  /** Aborted: stop quietly at the next chunk (the reader of the output went away). */
  signal?: AbortSignal;
}

export interface QueryColumns {
  /** As the query named them, duplicates and all. */
  names: string[];
  /** Unique, for row objects: a second `a` is `a:1` (as `queryWarehouse`'s rows have them). */
  keys: string[];
}

/** Where the rows of a streamed query go, a batch (at most one DuckDB chunk, 2048 rows) at a time. */
export interface QuerySink {
  /** Once, before any row. */
  columns(columns: QueryColumns): void | Promise<void>;
  /** Each row as its values in column order, converted by `jsonValue` (a BIGINT that fits as a number, …). */
  rows(rows: Json[][]): void | Promise<void>;
}

/** Which limit stopped a query. */
export type QueryStop = { limit: 'rows'; maxRows: number } | { limit: 'time'; timeoutMs: number };

export interface StreamedQuery {
  /** Rows handed to the sink. */
  rows: number;
  /** Set when a limit stopped the query before its last row. */
  stoppedBy?: QueryStop;
  /** The sink got its columns (a query interrupted before its first row has none). */
  columns: boolean;
}

/**
 * Runs SQL against the warehouse, sandboxed as `queryWarehouse` is, and hands its rows
 * to `sink` as DuckDB produces them, one chunk at a time: memory stays flat whatever the result's
 * size. At `maxRows` rows it stops (reading one more chunk to know whether there are more); at
 * `timeoutMs` it interrupts DuckDB. Either way the rows handed over so far stay handed over, and
 * the answer says which limit stopped it.
 */
export async function streamWarehouseQuery(dataDir: string, sql: string, sink: QuerySink, limits: QueryLimits = {}): Promise<StreamedQuery> {
  const timeoutMs = limits.timeoutMs ?? 0;
  const query = streamWithin(dataDir, sql, sink, limits);
  // Only a shared lake's reads go over HTTP, where an interrupt is not heard.
  return timeoutMs > 0 && lakeLocation(dataDir).shared ? givenUpPastItsTime(query, dataDir, timeoutMs) : query;
}

/**
 * How long past its time limit a query may take to stop. DuckDB stops an interrupted query within
 * milliseconds, but not one waiting on a read from the object store (its HTTP client does not
 * hear the interrupt), which only that client's own timeout ends: 30 s, tried 4 times, so a query
 * of a frozen object store took 121 s for a 60 s limit. Its reads are given the query's time limit
 * and no retry (openLake's readTimeoutSeconds), so the process can exit soon after.
 */
export const STOP_GRACE_MS = 5_000;

/**
 * The query's outcome; or, when it was interrupted or failed at its time limit (a read of the
 * object store timed out) or is still running once the grace is past too, an error saying what
 * holds it: a shared lake's object store, when a probe of it hears nothing. A query still running is abandoned (its
 * reads end at their own timeout, the time limit, and the process can then exit).
 */
async function givenUpPastItsTime(query: Promise<StreamedQuery>, dataDir: string, timeoutMs: number): Promise<StreamedQuery> {
  const began = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const past = new Promise<'past'>((resolve) => (timer = setTimeout(() => resolve('past'), timeoutMs + STOP_GRACE_MS)));
  let first: StreamedQuery | 'past';
  try {
    first = await Promise.race([query, past]);
  } catch (error) {
    if (Date.now() - began >= timeoutMs) throw (await objectStoreSilent(dataDir, timeoutMs)) ?? error;
    throw error;
  } finally {
    clearTimeout(timer);
  }
  // Interrupted at its time: a slow query, or an object store that does not answer (its reads end there too).
  if (first !== 'past') {
    const silent = first.stoppedBy?.limit === 'time' ? await objectStoreSilent(dataDir, timeoutMs) : undefined;
    if (silent) throw silent;
    return first;
  }
  query.catch(() => undefined);
  throw (await objectStoreSilent(dataDir, timeoutMs)) ?? new Error(`the query did not stop within ${STOP_GRACE_MS / 1000} s of its time limit (--timeout ${timeoutMs / 1000}), and was given up`);
}

/** The error to give when the lake is shared and its object store does not answer a probe; undefined otherwise. */
async function objectStoreSilent(dataDir: string, timeoutMs: number): Promise<Error | undefined> {
  const location = lakeLocation(dataDir);
  const storage = process.env.HARVESTER_STORAGE;
  if (!location.shared || !storage) return undefined;
  const endpoint = objectStorageSettings(storage, process.env).endpoint ?? 'https://s3.amazonaws.com';
  if (await answers(endpoint)) return undefined;
  return new Error(`the warehouse's object store does not answer (${endpoint}, data in ${location.dataPath}): the query was given up at its time limit (--timeout ${timeoutMs / 1000})`);
}

/** Whether an HTTP server answers at `url` (any status) within 2 s. */
async function answers(url: string): Promise<boolean> {
  try {
    await fetch(url, { method: 'HEAD', signal: AbortSignal.timeout(2_000) });
    return true;
  } catch {
    return false;
  }
}

/** The query under its limits, as DuckDB keeps them. */
async function streamWithin(dataDir: string, sql: string, sink: QuerySink, limits: QueryLimits): Promise<StreamedQuery> {
  const readTimeoutSeconds = limits.timeoutMs ? limits.timeoutMs / 1000 : undefined;
  return withWarehouse(dataDir, readTimeoutSeconds, async (connection, check) => {
    await check(sql);
    const maxRows = limits.maxRows ?? 0;
    const timeoutMs = limits.timeoutMs ?? 0;
    let timedOut = false;
    // An interrupted fetch of a streaming result may end the stream as if it had no more rows
    // rather than fail: whether the time limit struck is known from this flag, not from an error.
    const timer =
      timeoutMs > 0
        ? setTimeout(() => {
            timedOut = true;
            connection.interrupt();
          }, timeoutMs)
        : undefined;
    const stopReading = () => connection.interrupt();
    limits.signal?.addEventListener('abort', stopReading, { once: true });
    const outcome: StreamedQuery = { rows: 0, columns: false };
    const timeLimit = (): StreamedQuery => ({ ...outcome, stoppedBy: { limit: 'time', timeoutMs } });
    try {
      const result = await connection.stream(sql);
      if (timedOut) return timeLimit();
      await sink.columns({ names: result.columnNames(), keys: result.deduplicatedColumnNames() });
      outcome.columns = true;
      for (;;) {
        if (timedOut) return timeLimit();
        if (limits.signal?.aborted) return outcome;
        const chunk = await result.fetchChunk();
        if (timedOut) return timeLimit();
        if (!chunk || chunk.rowCount === 0) return outcome;
        const room = maxRows > 0 ? maxRows - outcome.rows : Number.POSITIVE_INFINITY;
        // The limit was reached exactly by the rows before, and here is one more.
        if (room <= 0) return { ...outcome, stoppedBy: { limit: 'rows', maxRows } };
        let rows = chunk.convertRows(jsonValue) as Json[][];
        const cut = rows.length > room;
        if (cut) rows = rows.slice(0, room);
        outcome.rows += rows.length;
        await sink.rows(rows);
        if (cut) return { ...outcome, stoppedBy: { limit: 'rows', maxRows } };
      }
    } catch (error) {
      // DuckDB's "INTERRUPT Error: Interrupted!", from our timer or from the reader going away.
      if (timedOut) return timeLimit();
      if (limits.signal?.aborted) return outcome;
      // A syntax error comes from splitting the SQL into statements; the prefix says nothing to a user.
      const message = error instanceof Error ? error.message : '';
      if (message.startsWith(EXTRACT_PREFIX)) throw new Error(message.slice(EXTRACT_PREFIX.length), { cause: error });
      throw error;
    } finally {
      clearTimeout(timer);
      limits.signal?.removeEventListener('abort', stopReading);
    }
  });
}

const EXTRACT_PREFIX = 'Failed to extract statements: ';

/** Integer types JavaScript's converter gives as strings, whatever their value. */
const WIDE_INTEGERS = new Set<DuckDBTypeId>([DuckDBTypeId.BIGINT, DuckDBTypeId.UBIGINT, DuckDBTypeId.HUGEINT, DuckDBTypeId.UHUGEINT]);

/**
 * A value of a query's result as JSON, the rule `harvester query` prints by (README, "Reading the
 * warehouse"): DuckDB's own JSON conversion (JsonDuckDBValueConverter), except that a 64- or
 * 128-bit integer (BIGINT, UBIGINT, HUGEINT, UHUGEINT: counts, views, credits, sums of them) is a
 * number when a double holds it exactly, within ±(2^53 − 1), and a string of its digits beyond.
 * DECIMAL stays a string (exact, with its scale), as do timestamps. Nested values (lists,
 * structs) follow the same rule: DuckDB hands this converter down to them.
 */
const jsonValue: DuckDBValueConverter<Json> = (value, type, converter) => {
  if (value !== null && typeof value === 'bigint' && WIDE_INTEGERS.has(type.typeId)) {
    return value >= -MAX_EXACT && value <= MAX_EXACT ? Number(value) : value.toString();
  }
  return JsonDuckDBValueConverter(value, type, converter);
};
const MAX_EXACT = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * Opens the warehouse read-only and sandboxed for `use`, with `check`, which refuses SQL that would
 * do what the sandbox's settings do not stop (forbiddenStatement), and turns DuckDB's refusals into
 * one line naming what was refused.
 */
async function withWarehouse<T>(dataDir: string, readTimeoutSeconds: number | undefined, use: (connection: DuckDBConnection, check: (sql: string) => Promise<void>) => Promise<T>): Promise<T> {
  const db = await openLake(dataDir, 'sandboxed', { readTimeoutSeconds });
  const refuse = (refused: string, cause?: unknown) =>
    new Error(`refused: ${refused}; queries read only the warehouse's tables (file access, extensions and settings are locked off)`, { cause });
  try {
    return await use(db.connection, async (sql) => {
      const forbidden = await forbiddenStatement(db.connection, sql);
      if (forbidden) throw refuse(forbidden);
    });
  } catch (error) {
    const message = (error as Error).message.split('\n')[0] ?? '';
    const refused = refusal(message);
    if (refused) throw refuse(refused, error);
    throw error;
  } finally {
    await db.close();
  }
}

/**
 * DuckLake's functions that only read: anything else of DuckLake's in a query's plan writes
 * (ducklake_cleanup_old_files, ducklake_merge_adjacent_files, …). Attached read-only, the lake
 * refuses their changes to its catalog, but only after the files are written or deleted.
 */
const READING_LAKE_FUNCTIONS = new Set([
  'DUCKLAKE_SCAN',
  'DUCKLAKE_SNAPSHOTS',
  'DUCKLAKE_TABLE_INFO',
  'DUCKLAKE_LIST_FILES',
  'DUCKLAKE_TABLE_CHANGES',
  'DUCKLAKE_TABLE_INSERTIONS',
  'DUCKLAKE_TABLE_DELETIONS',
  'DUCKLAKE_OPTIONS',
]);

/**
 * What the SQL would do that the sandbox's settings do not stop, if anything. Switching files off
 * does not stop ATTACH of a DuckLake or SQLite file (their extensions open the file themselves), and
 * the lake's catalog, attached again read-write, would let a query drop the warehouse's tables. And
 * the lake's data folder stays readable for DuckLake, so it is writable too: COPY … TO a file there,
 * or DuckLake's maintenance functions, found by name in the query's plan (a name built at run
 * time, through query(), is in the plan too). One statement at a time, so its plan is the query's.
 */
async function forbiddenStatement(connection: DuckDBConnection, sql: string): Promise<string | undefined> {
  // SQL that does not parse fails when it runs, with DuckDB's own message.
  const statements = await connection.extractStatements(sql).catch(() => undefined);
  if (!statements) return undefined;
  let explain = false;
  for (let index = 0; index < statements.count; index++) {
    let type: StatementType;
    try {
      type = (await statements.prepare(index)).statementType;
    } catch {
      // A statement that does not prepare fails when it runs, with DuckDB's own message.
      continue;
    }
    if (type === StatementType.ATTACH || type === StatementType.DETACH) return 'the query would attach a database';
    if (type === StatementType.COPY || type === StatementType.EXPORT || type === StatementType.COPY_DATABASE) return 'the query would write a file';
    // CHECKPOINT of a lake is DuckLake's maintenance (it flushes and rewrites files), and parses as a CALL.
    if (type === StatementType.CALL) return 'the query would call a procedure (CALL, CHECKPOINT); for a table function, SELECT * FROM it';
    explain = type === StatementType.EXPLAIN;
  }
  if (statements.count > 1) return `the query has ${statements.count} statements: run one at a time`;
  // EXPLAIN ANALYZE runs the query it explains.
  if (explain && /^\s*explain\s*(\(|analy[sz]e)/i.test(sql)) return 'EXPLAIN ANALYZE runs the query; plain EXPLAIN shows its plan';
  // The plan of a statement that does not plan fails when it runs, with DuckDB's own message.
  const plan = await connection.runAndReadAll(explain ? sql : `EXPLAIN ${sql}`).catch(() => undefined);
  const text = plan ? JSON.stringify(plan.getRows()) : '';
  const writing = [...text.matchAll(/DUCKLAKE_[A-Z_]+/g)].map(([name]) => name).find((name) => !READING_LAKE_FUNCTIONS.has(name));
  return writing ? `the query would change the lake (${writing.toLowerCase()}; harvester maintain does that)` : undefined;
}

/** What DuckDB refused the query, in the user's terms, from DuckDB's message; undefined for any other error. */
function refusal(message: string): string | undefined {
  const access = /Cannot access (file|directory) "([^"]*)" - file system operations are disabled/.exec(message);
  if (access) {
    const [, kind = '', path = ''] = access;
    // INSTALL reaches for DuckDB's extension folder, not for a file of the user's.
    if (/[/\\]\.duckdb[/\\]extensions/.test(path)) return 'the query would install an extension';
    return `the query would read or write the ${kind} ${path}`;
  }
  if (/Loading external extensions is disabled/.test(message)) return 'the query would load an extension';
  const setting = /Cannot change configuration option "([^"]*)" - the configuration has been locked/.exec(message)?.[1];
  if (setting !== undefined) return `the query would change the setting ${setting}`;
  return undefined;
}
