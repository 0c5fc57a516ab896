/**
 * The lake from the tools analysts use: DuckDB's Python client and its CLI, both at the lake's
 * DuckDB version (1.5.5: the extensions setup installs are built for it), which `npm run setup`
 * installs from PyPI into .tools/analysts with pytz (DuckDB's Python client needs it for
 * TIMESTAMPTZ columns). A Python of the user's own takes them through PYTHONPATH, ahead of a
 * duckdb of another version it may have.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { TOOLS_DIR } from '../project-paths.js';
import { readerSql } from '../warehouse/lake.js';

/** Where setup pip-installs duckdb==1.5.5, pytz and duckdb-cli==1.5.5 (scripts/setup.mjs, ANALYST_REQUIREMENTS). */
export const ANALYST_PYTHON_DIR = join(TOOLS_DIR, 'analysts');
/** DuckDB's CLI, as PyPI's duckdb-cli wheel ships it. */
export const DUCKDB_CLI = join(ANALYST_PYTHON_DIR, 'duckdb_cli', 'duckdb');

/** What the demo's Python line prints: a few observations, timestamps included. */
const SAMPLE_SQL = 'SELECT platform, item_id, observed_at, views, likes FROM item_metrics ORDER BY observed_at DESC LIMIT 3';

/**
 * A text as one word of a POSIX shell: in double quotes, with the four characters special there
 * (\\ " $ `) escaped, so SQL's single quotes read as they are. (Hand-written: one line, where a
 * library would add a dependency for it.)
 */
export function shellWord(text: string): string {
  return `"${text.replace(/[\\"$`]/g, '\\$&')}"`;
}

/** The shell line that reads the data directory's lake from Python, as printed: it runs as it is, from any directory. */
export function pythonReaderLine(dataDir: string, sql = SAMPLE_SQL): string {
  const code = `import duckdb; con = duckdb.connect(); con.execute(${JSON.stringify(readerSql(dataDir))}); print(con.sql(${JSON.stringify(sql)}).fetchall())`;
  return `PYTHONPATH=${shellWord(ANALYST_PYTHON_DIR)} python3 -c ${shellWord(code)}`;
}

/** DuckDB's CLI, or an error saying how to install it. */
export function duckdbCli(): string {
  if (!existsSync(DUCKDB_CLI)) throw new Error(`no DuckDB CLI at ${DUCKDB_CLI}: run \`npm run setup\`, which installs it from PyPI's duckdb-cli==1.5.5`);
  return DUCKDB_CLI;
}
