/**
 * `harvester query` on results too big or too slow to hold: it streams every format, stops at
 * --max-rows and --timeout with a message naming the limit and the flag, and exits 4. The
 * warehouse is a real one, published by `harvester load` into an empty data directory; the big
 * results come from DuckDB's range(), which the sandbox allows (it reads no file).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';

const LIMIT_EXIT = 4;
let env: Record<string, string>;
beforeAll(async () => {
  env = { HARVESTER_DATA_DIR: mkdtempSync(join(tmpdir(), 'cli-query-')) };
  const load = await runCli(['load'], env);
  expect(load.code, load.stderr).toBe(0);
});

/** CSV output's data lines (the header and the final line end dropped). */
function csvRows(stdout: string): string[] {
  const lines = stdout.split('\r\n');
  expect(lines.pop()).toBe('');
  return lines.slice(1);
}

const ROW_LIMIT = /^harvester: stopped at the row limit: printed the first (\d+) rows and there are more \(--max-rows (\d+)\); raise it with --max-rows <n>, or --max-rows 0 for no limit\n$/;
const TIME_LIMIT = /^harvester: stopped at the time limit: the query was interrupted after ([\d.]+) s \(--timeout ([\d.]+)\) with (\d+) rows? printed; raise it with --timeout <seconds>, or --timeout 0 for no limit\n$/;

describe('harvester query --max-rows', () => {
  it('prints exactly the limit, in order, then names the limit and its flag on stderr and exits 4 (CSV and JSON)', async () => {
    const csv = await runCli(['query', 'SELECT range AS i FROM range(5000) ORDER BY i', '--format', 'csv', '--max-rows', '1234'], env);
    expect(csv.code).toBe(LIMIT_EXIT);
    expect(csv.stdout.startsWith('i\r\n')).toBe(true);
    expect(csvRows(csv.stdout)).toEqual(Array.from({ length: 1234 }, (_, index) => String(index)));
    expect(csv.stderr).toMatch(ROW_LIMIT);
    expect(ROW_LIMIT.exec(csv.stderr)!.slice(1)).toEqual(['1234', '1234']);

    // JSON stays one parseable array, of exactly the rows printed.
    const json = await runCli(['query', 'SELECT range AS i FROM range(5000) ORDER BY i', '--format', 'json', '--max-rows', '1000'], env);
    expect(json.code).toBe(LIMIT_EXIT);
    const rows = JSON.parse(json.stdout) as { i: number }[];
    expect(rows).toHaveLength(1000);
    expect(rows.at(-1)).toEqual({ i: 999 });
    expect(json.stderr).toMatch(ROW_LIMIT);
  });

  it('a result of exactly the limit is whole: no message, exit 0; one row more is stopped (across DuckDB chunk edges)', async () => {
    const exact = await runCli(['query', 'SELECT * FROM range(2048)', '--format', 'csv', '--max-rows', '2048'], env);
    expect(exact.code).toBe(0);
    expect(exact.stderr).toBe('');
    expect(csvRows(exact.stdout)).toHaveLength(2048);
    const over = await runCli(['query', 'SELECT * FROM range(2049)', '--format', 'csv', '--max-rows', '2048'], env);
    expect(over.code).toBe(LIMIT_EXIT);
    expect(csvRows(over.stdout)).toHaveLength(2048);
    expect(over.stderr).toMatch(ROW_LIMIT);
  });

  it('defaults to 100000 rows in the table format (200000 asked: no stack overflow), and says so under the table', async () => {
    const result = await runCli(['query', 'SELECT * FROM range(200000)'], env);
    expect(result.stderr).not.toContain('Maximum call stack size exceeded');
    expect(result.code).toBe(LIMIT_EXIT);
    const lines = result.stdout.split('\n');
    expect(lines.pop()).toBe('');
    expect(lines.at(-1)).toBe('(100000 rows; stopped by --max-rows 100000)');
    expect(lines.filter((line) => /^\d+$/.test(line))).toHaveLength(100_000);
    expect(ROW_LIMIT.exec(result.stderr)!.slice(1)).toEqual(['100000', '100000']);
  });

  it('--max-rows raises the limit, and 0 lifts it', async () => {
    const raised = await runCli(['query', 'SELECT * FROM range(150000)', '--format', 'csv', '--max-rows', '150000'], env);
    expect(raised.code).toBe(0);
    expect(raised.stderr).toBe('');
    expect(csvRows(raised.stdout)).toHaveLength(150_000);
    const none = await runCli(['query', 'SELECT * FROM range(150000)', '--format', 'json', '--max-rows', '0'], env);
    expect(none.code).toBe(0);
    expect(JSON.parse(none.stdout)).toHaveLength(150_000);
  });

  it('refuses a limit that is not a whole number', async () => {
    const result = await runCli(['query', 'SELECT 1', '--max-rows', '-5'], env);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("option '--max-rows <n>' argument '-5' is invalid");
  });
});

describe('harvester query in the table format', () => {
  it('prints 250000 rows without overflowing the stack, aligned, the header again where a column widens', async () => {
    const result = await runCli(['query', "SELECT range AS n, 'x' AS tag FROM range(250000) ORDER BY n", '--max-rows', '0'], env);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const lines = result.stdout.split('\n');
    expect(lines.pop()).toBe('');
    expect(lines.at(-1)).toBe('(250000 rows)');
    const rows = lines.filter((line) => /^\d+ +x$/.test(line));
    expect(rows).toHaveLength(250_000);
    expect(lines.slice(0, 3)).toEqual(['n    tag', '---  ---', '0    x']);
    // Widths come from the first 1000 rows (1000 rows of up to 3 digits); 4, 5 and 6 digits each
    // widen the first column, and each widening prints the header again over an aligned block.
    const headers = lines.flatMap((line, index) => (line.startsWith('n ') ? [index] : []));
    expect(headers).toHaveLength(4);
    for (const index of headers) {
      const width = lines[index + 1]!.split('  ')[0]!.length;
      expect(lines[index + 2]!.indexOf('x')).toBe(width + 2);
    }
    expect(lines).toContain('99999  x');
    expect(lines).toContain('100000  x');
  });
});

describe('harvester query: whole values', () => {
  const long = `https://www.tiktok.com/@someone/video/${'7'.repeat(70)}`;

  it('the table marks a cut cell with … and says on stderr how to see it whole; --max-width 0 cuts nothing', async () => {
    const cut = await runCli(['query', `SELECT '${long}' AS url, 'short' AS tag`], env);
    expect(cut.code, cut.stderr).toBe(0);
    const row = cut.stdout.split('\n')[2]!;
    expect(row).toBe(`${long.slice(0, 59)}…  short`);
    expect(cut.stderr).toBe('harvester: 1 cell was cut to 60 characters, marked …; print whole values with --format csv, --format json or --max-width 0\n');
    const wider = await runCli(['query', `SELECT '${long}' AS url, 'short' AS tag`, '--max-width', '0'], env);
    expect(wider.stderr).toBe('');
    expect(wider.stdout.split('\n')[2]).toBe(`${long}  short`);
    // A cell of exactly the width is whole: no mark, no note.
    const exact = await runCli(['query', `SELECT '${'x'.repeat(60)}' AS s`], env);
    expect(exact.stdout.split('\n')[2]).toBe('x'.repeat(60));
    expect(exact.stderr).toBe('');
  });

  it('JSON prints 64- and 128-bit integers as numbers where a double holds them exactly, as strings beyond', async () => {
    const sql = `SELECT 60000::BIGINT AS credits, 9007199254740991::BIGINT AS largest, -9007199254740991::BIGINT AS smallest,
      9007199254740992::BIGINT AS beyond, 170141183460469231731687303715884105727::HUGEINT AS huge, 5::HUGEINT AS small_huge,
      [1::BIGINT, 2] AS list, {'n': 3::BIGINT} AS struct, 1.50::DECIMAL(5, 2) AS price, 7::INTEGER AS int, NULL::BIGINT AS nothing`;
    const json = await runCli(['query', sql, '--format', 'json'], env);
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual([
      { credits: 60000, largest: 9007199254740991, smallest: -9007199254740991, beyond: '9007199254740992', huge: '170141183460469231731687303715884105727', small_huge: 5, list: [1, 2], struct: { n: 3 }, price: '1.50', int: 7, nothing: null },
    ]);
    // CSV prints the same digits either way.
    const csv = await runCli(['query', 'SELECT 60000::BIGINT AS credits, 9007199254740992::BIGINT AS beyond', '--format', 'csv'], env);
    expect(csv.stdout).toBe('credits,beyond\r\n60000,9007199254740992\r\n');
  });
});

describe('harvester query --timeout', () => {
  // 10^15 rows: no machine finishes it; only the interrupt ends it. (The cross join holds its right
  // side in memory, so that side stays small.)
  const endless = 'SELECT sum(a.range * b.range) AS s FROM range(1000000000) a, range(1000000) b';

  it('interrupts a query that runs longer than the limit, says so, and exits 4', async () => {
    // The query never ends by itself, so its exit with the limit's code and message is the interrupt's.
    const result = await runCli(['query', endless, '--timeout', '1'], env);
    expect(result.code).toBe(LIMIT_EXIT);
    expect(result.stderr).toMatch(TIME_LIMIT);
    expect(TIME_LIMIT.exec(result.stderr)!.slice(1)).toEqual(['1', '1', '0']);
    expect(result.stdout).toBe('');
  });

  it('keeps the rows printed before the interrupt, and counts them in the message', async () => {
    // Rows keep coming (one in 1000 of the join's) until the interrupt.
    const streaming = 'SELECT a.range AS i, b.range AS j FROM range(1000000000) a, range(1000) b WHERE (a.range + b.range) % 1000 = 0';
    // How many rows come before the limit depends on how busy the machine is (none, once, at a load
    // of 12 in 2 s): each run's outcome is checked, and the limit doubled until rows came before it.
    let printed = 0;
    for (const timeout of [2, 4, 8, 16]) {
      const result = await runCli(['query', streaming, '--format', 'csv', '--timeout', String(timeout), '--max-rows', '0'], env);
      expect(result.code).toBe(LIMIT_EXIT);
      const match = TIME_LIMIT.exec(result.stderr);
      expect(match, result.stderr).not.toBeNull();
      const rows = csvRows(result.stdout);
      expect(rows.length).toBe(Number(match![3]));
      // Every printed row is whole.
      expect(rows.every((row) => /^\d+,\d+$/.test(row))).toBe(true);
      printed = rows.length;
      if (printed > 0) break;
    }
    expect(printed).toBeGreaterThan(0);
  }, 60_000);

  it('--timeout raises the limit, and 0 lifts it', async () => {
    // About 3 s of DuckDB work on a small machine: stopped at 0.2 s, finished with room.
    const slow = 'SELECT sum(a.range * b.range) AS s FROM range(100000) a, range(5000) b';
    const stopped = await runCli(['query', slow, '--format', 'json', '--timeout', '0.2'], env);
    expect(stopped.code).toBe(LIMIT_EXIT);
    expect(TIME_LIMIT.exec(stopped.stderr)!.slice(1, 3)).toEqual(['0.2', '0.2']);
    for (const timeout of ['120', '0']) {
      const finished = await runCli(['query', slow, '--format', 'json', '--timeout', timeout], env);
      expect(finished.stderr).toBe('');
      expect(finished.code).toBe(0);
      expect(JSON.parse(finished.stdout)).toEqual([{ s: '62486875125000000' }]);
    }
  });
});
