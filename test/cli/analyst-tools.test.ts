/**
 * The lake from the tools analysts use, each in one line: the Python line the demo prints, run as
 * printed from another directory with the Python this machine has (the duckdb it imports is the one
 * in `.tools/analysts`, which setup installs, whether or not that Python has a duckdb of its own); the data dictionary's lines for
 * DuckDB's CLI, Python, pandas and polars, run as written there from a project root; and
 * `harvester sql -c`. Every one returns rows with their timestamps. pandas and polars come from
 * `.tools/python` (setup --for-tests), standing in for the `pip install` the data dictionary
 * says.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANALYST_PYTHON_DIR, pythonReaderLine } from '../../src/cli/analyst-tools.js';
import { PROJECT_ROOT, TOOLS_DIR } from '../../src/project-paths.js';
import { loadLandings } from '../../src/warehouse/loader.js';
import { runCli } from '../support/cli.js';
import { TEST_PYTHON_DIR } from '../support/python.js';
import { landedSample } from '../support/sample-harvest.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';

let emulator: TestEmulator;
let dir: string;
let dataDir: string;
/** A stand-in for the project's root: its .tools, dist and data/ (the harvested lake), so the documented relative paths hold. */
let projectRoot: string;

/** The environment of a user's shell: no PYTHONPATH of the tests'. */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  if (extra.PYTHONPATH === undefined) delete env.PYTHONPATH;
  delete env.HARVESTER_DATA_DIR;
  return env;
}

function shell(line: string, cwd: string, env: NodeJS.ProcessEnv = userEnv()) {
  const result = spawnSync('sh', ['-c', line], { cwd, env, encoding: 'utf8', timeout: 120_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** The code blocks of the data dictionary's section on reading the lake, with their language. */
function documentedBlocks(): { language: string; code: string }[] {
  const text = readFileSync(join(PROJECT_ROOT, 'docs', 'data-dictionary.md'), 'utf8');
  const section = text.slice(text.indexOf('- Attach the warehouse read-only'), text.indexOf('- With shared storage ('));
  return [...section.matchAll(/^( *)```(\w+)\n([\s\S]*?)^\1```$/gm)].map((match) => ({
    language: match[2]!,
    code: match[3]!
      .split('\n')
      .map((line) => line.slice(match[1]!.length))
      .join('\n')
      .trim(),
  }));
}

beforeAll(async () => {
  emulator = await startTestEmulator();
  dir = mkdtempSync(join(tmpdir(), 'analyst-tools-'));
  projectRoot = join(dir, 'project');
  mkdirSync(projectRoot);
  dataDir = join(projectRoot, 'data');
  await landedSample(emulator, 'run-analysts', dataDir);
  await loadLandings(dataDir);
  symlinkSync(TOOLS_DIR, join(projectRoot, '.tools'));
  symlinkSync(join(PROJECT_ROOT, 'dist'), join(projectRoot, 'dist'));
}, 120_000);
afterAll(async () => {
  await emulator?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the lake from the tools analysts use', () => {
  it("the demo's Python line runs as printed, from any directory, with this machine's Python, and returns rows with their timestamps", () => {
    const line = pythonReaderLine(dataDir);
    expect(line.startsWith(`PYTHONPATH="${ANALYST_PYTHON_DIR}" python3 -c "`)).toBe(true);
    // The line brings its own duckdb, the one setup installs, whatever this machine's Python has
    // (none, or another version: a data scientist's machine often has one, and pandas).
    const imported = shell(line.replace(/ -c ".*"$/, ' -c "import duckdb; print(duckdb.__file__)"'), tmpdir());
    expect(imported.stderr).toBe('');
    expect(imported.stdout.startsWith(`${ANALYST_PYTHON_DIR}/`)).toBe(true);
    const result = shell(line, tmpdir());
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    // pytz's UTC, which DuckDB's client needs for a TIMESTAMPTZ: without pytz, fetchall() fails.
    // Python's repr leaves out seconds and microseconds that are zero (a row stamped on the minute).
    expect(result.stdout).toMatch(/^\[\('(tiktok|instagram)', '\w+', datetime\.datetime\(\d{4}, \d+, \d+, \d+, \d+(, \d+)?(, \d+)?, tzinfo=<StaticTzInfo 'Etc\/UTC'>\), \d+, \d+\)/);
    expect(result.stdout.match(/datetime\.datetime\(/g)).toHaveLength(3);
  });

  it("the data dictionary's lines run as written, from the project's root: DuckDB's CLI, harvester sql -c, Python, pandas and polars", () => {
    const blocks = documentedBlocks();
    const find = (language: string, marker: string | ((code: string) => boolean)) => {
      const found = blocks.filter((block) => block.language === language && (typeof marker === 'string' ? block.code.includes(marker) : marker(block.code)));
      expect(found, `${language} block with ${marker}`).toHaveLength(1);
      return found[0]!.code;
    };
    const cli = shell(find('sh', 'duckdb_cli/duckdb'), projectRoot);
    expect(cli.stderr).toBe('');
    expect(cli.stdout).toContain('timestamp with time zone');
    expect(cli.stdout.match(/│ (tiktok|instagram) +│ \w+ +│ \d{4}-\d\d-\d\d \d\d:\d\d:\d\d[.\d]*\+00 +│ +\d+ │/g)).toHaveLength(5);

    const sql = shell(find('sh', 'main.js sql -c'), projectRoot);
    expect(sql.stderr).toBe('');
    expect(sql.stdout).toBe(cli.stdout);

    const python = shell(find('sh', 'PYTHONPATH=.tools/analysts'), projectRoot);
    expect(python.stderr).toBe('');
    expect(python.stdout.match(/datetime\.datetime\([^)]*tzinfo=<StaticTzInfo 'Etc\/UTC'>\)/g)).toHaveLength(5);

    // pandas and polars as a user's `pip install` puts them beside duckdb and pytz.
    const withDataframes = userEnv({ PYTHONPATH: `${ANALYST_PYTHON_DIR}:${TEST_PYTHON_DIR}` });
    const rows = spawnSync('python3', ['-c', `${find('python', (code) => code.endsWith('USE lake")'))}\nprint(con.sql("SELECT count(*) FROM item_metrics").fetchone()[0])`], { cwd: projectRoot, env: withDataframes, encoding: 'utf8' });
    expect(rows.stderr).toBe('');
    const observations = Number(rows.stdout.trim());
    expect(observations).toBeGreaterThan(0);
    const pandas = spawnSync('python3', ['-c', find('python', '# pandas')], { cwd: projectRoot, env: withDataframes, encoding: 'utf8' });
    expect(pandas.stderr).toBe('');
    expect(pandas.stdout.trim()).toMatch(new RegExp(`^datetime64\\[(us|ns), (Etc\\/)?UTC\\] ${observations}$`));
    const polars = spawnSync('python3', ['-c', find('python', '# polars')], { cwd: projectRoot, env: withDataframes, encoding: 'utf8' });
    expect(polars.stderr).toBe('');
    expect(polars.stdout.trim()).toMatch(new RegExp(`^Datetime\\(time_unit='us', time_zone='(Etc\\/)?UTC'\\) ${observations}$`));
  });

  it('harvester sql -c reads the lake read-only: a write is refused by DuckDB, and the lake is as it was', async () => {
    const env = { HARVESTER_DATA_DIR: dataDir };
    const before = await runCli(['sql', '-c', 'SELECT count(*) AS n FROM items'], env);
    expect(before.code, before.stderr).toBe(0);
    const write = await runCli(['sql', '-c', 'DELETE FROM items'], env);
    expect(write.code).not.toBe(0);
    expect(write.stderr).toContain('attached in read-only mode');
    const after = await runCli(['sql', '-c', 'SELECT count(*) AS n FROM items'], env);
    expect(after.stdout).toBe(before.stdout);
    expect(before.stdout).toMatch(/│ +[1-9]\d* │/);
    // No lake yet: said in one line, as query says it.
    const none = await runCli(['sql', '-c', 'SELECT 1'], { HARVESTER_DATA_DIR: join(dir, 'empty') });
    expect(none.code).toBe(1);
    expect(none.stderr).toBe(`harvester: no warehouse at ${join(dir, 'empty', 'lake', 'catalog.sqlite')} yet: run a harvest (or a load) first\n`);
  });
});
