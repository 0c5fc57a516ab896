import { spawn } from 'node:child_process';
import { Command } from 'commander';
import { dataDirFromEnv } from '../../config/environment.js';
import { lakeExists, lakeLocation, readerSql } from '../../warehouse/lake.js';
import { duckdbCli } from '../analyst-tools.js';

/**
 * DuckDB's own shell on the lake, attached read-only: what analysts know (dot commands, history,
 * .mode, .once file.csv), without the two LOADs and the ATTACH. Unlike `harvester query`, nothing is
 * sandboxed beyond the lake being read-only: it is the user's own DuckDB session.
 */
export function sqlCommand(): Command {
  return new Command('sql')
    .description("DuckDB's shell (its CLI, 1.5.5) on the warehouse, attached read-only as the current database; -c runs one statement and exits")
    .option('-c, --command <sql>', 'run this SQL (or dot command), print its result and exit')
    .addHelpText(
      'after',
      `
Opens the lake in <data dir>/lake (HARVESTER_DATA_DIR, default ./data) read-only, as the database
"lake", the default one: \`SELECT * FROM items\` works at once. The shell is DuckDB's own CLI, which
\`npm run setup\` installs from PyPI (duckdb-cli==1.5.5) into .tools/analysts; its file access is
yours (COPY … TO, read_csv), unlike \`harvester query\`'s. Tables: docs/data-dictionary.md.

Examples:
  $ harvester sql
  $ harvester sql -c "SELECT platform, count(*) FROM items GROUP BY ALL"
  $ harvester sql -c "COPY (SELECT * FROM latest_item_metrics) TO 'latest.csv'"`,
    )
    .action(async (options: { command?: string }) => {
      const dataDir = dataDirFromEnv();
      const location = lakeLocation(dataDir);
      if (location.shared) {
        throw new Error('harvester sql opens a lake in the data directory; a lake in shared storage needs its credentials in the session: attach it as docs/data-dictionary.md shows, or use `harvester query`');
      }
      // Said as `query` says it: DuckDB's own message is about a SQLite file it could not open.
      if (!(await lakeExists(dataDir))) throw new Error(`no warehouse at ${location.description} yet: run a harvest (or a load) first`);
      // -init of an empty file: a ~/.duckdbrc of the user's, which may attach or set anything, runs not before the lake.
      const args = ['-init', '/dev/null', '-cmd', readerSql(dataDir), ...(options.command === undefined ? [] : ['-c', options.command])];
      const child = spawn(duckdbCli(), args, { stdio: 'inherit' });
      const code = await new Promise<number>((resolve, reject) => {
        child.once('error', reject);
        child.once('exit', (exitCode, signal) => resolve(exitCode ?? (signal ? 128 : 1)));
      });
      process.exitCode = code;
    });
}
