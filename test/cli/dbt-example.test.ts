/**
 * examples/dbt builds on a lake this test harvests: `dbt build` (dbt-duckdb, from `.tools/python`,
 * which setup --for-tests installs from PyPI) runs its sources' key tests, its model on the analyst
 * view top_items_per_account and the model's tests, and passes; a lake whose natural key repeats
 * fails them. The project is copied to a temporary folder, so its target/ and logs/ land there.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT, TOOLS_DIR } from '../../src/project-paths.js';
import { openLake } from '../../src/warehouse/lake.js';
import { loadLandings } from '../../src/warehouse/loader.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { TEST_PYTHON_DIR } from '../support/python.js';
import { landedSample } from '../support/sample-harvest.js';

let emulator: TestEmulator;
let dir: string;
let dataDir: string;

beforeAll(async () => {
  emulator = await startTestEmulator();
  dir = mkdtempSync(join(tmpdir(), 'dbt-example-'));
  dataDir = join(dir, 'data');
  await landedSample(emulator, 'run-dbt', dataDir);
  await loadLandings(dataDir);
}, 120_000);
afterAll(async () => {
  await emulator?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** `dbt build` in a copy of examples/dbt, on `lake`, talking to nothing but the files (no usage statistics sent). */
function dbtBuild(project: string, lake: string) {
  cpSync(join(PROJECT_ROOT, 'examples', 'dbt'), project, { recursive: true });
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PYTHONPATH: TEST_PYTHON_DIR,
    HARVESTER_DATA_DIR: lake,
    HARVESTER_TOOLS: TOOLS_DIR,
    DO_NOT_TRACK: '1',
    DBT_SEND_ANONYMOUS_USAGE_STATS: 'false',
    // Anything dbt might still try to fetch goes to a closed loopback port: tests talk to no one else.
    HTTP_PROXY: 'http://127.0.0.1:9',
    HTTPS_PROXY: 'http://127.0.0.1:9',
    NO_PROXY: '',
  };
  const result = spawnSync('python3', [join(TEST_PYTHON_DIR, 'bin', 'dbt'), 'build', '--profiles-dir', '.', '--no-use-colors'], { cwd: project, env, encoding: 'utf8', timeout: 300_000 });
  return { code: result.status, output: `${result.stdout}${result.stderr}` };
}

describe('examples/dbt', () => {
  it('dbt build passes on a harvested lake: the sources\' natural keys, the model on the analyst view, its tests', async () => {
    const project = join(dir, 'project');
    const built = dbtBuild(project, dataDir);
    expect(built.code, built.output).toBe(0);
    const done = /Done\. PASS=(\d+) WARN=(\d+) ERROR=(\d+) SKIP=(\d+)(?: NO-OP=\d+)?(?: REUSED=\d+)? TOTAL=(\d+)/.exec(built.output);
    expect(done, built.output).not.toBeNull();
    const [, pass, warn, error, skip, total] = done!.map(Number);
    // 10 tests on the sources (unique and not null on five keys), the model, and its 4 tests; the
    // three on-run-start hooks count too.
    expect({ pass, warn, error, skip, total }).toEqual({ pass: 18, warn: 0, error: 0, skip: 0, total: 18 });
    expect(built.output).toMatch(/PASS source_unique_lake_items_platform_item_id/);
    expect(built.output).toMatch(/OK created sql table model main\.account_leaders/);
    // The model holds each account's top three, as the lake's view ranks them.
    const expected = await queryWarehouse(dataDir, 'SELECT count(*) AS n FROM top_items_per_account WHERE rank_in_account <= 3');
    const check = spawnSync('python3', ['-c', `import duckdb; print(duckdb.connect(${JSON.stringify(join(project, 'target', 'analysts.duckdb'))}, read_only=True).sql('SELECT count(*) FROM account_leaders').fetchone()[0])`], {
      env: { ...process.env, PYTHONPATH: TEST_PYTHON_DIR },
      encoding: 'utf8',
    });
    expect(check.stderr).toBe('');
    expect(Number(check.stdout.trim())).toBe(Number(expected.rows[0]!.n));
    expect(Number(expected.rows[0]!.n)).toBeGreaterThan(0);
  }, 300_000);

  it('fails on a lake whose natural key repeats: the unique test names the table', async () => {
    const broken = join(dir, 'broken');
    cpSync(dataDir, broken, { recursive: true });
    const db = await openLake(broken, 'write');
    try {
      await db.connection.run('INSERT INTO items SELECT * FROM items LIMIT 1');
    } finally {
      await db.close();
    }
    const built = dbtBuild(join(dir, 'project-broken'), broken);
    expect(built.code).not.toBe(0);
    expect(built.output).toMatch(/FAIL 1 source_unique_lake_items_platform_item_id/);
    expect(built.output).toMatch(/Done\. PASS=\d+ WARN=0 ERROR=1 /);
  }, 300_000);
});
