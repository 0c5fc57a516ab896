/**
 * The DuckLake bug the loads work around (docs/ducklake-merge-duplicates.md), reproduced without
 * the project: Python's duckdb 1.5.5 runs docs/repro/ducklake-merge-duplicates.sql in an empty
 * folder. While it reproduces, the workaround (a materialized merge source) stays; when an upgrade
 * of DuckDB fixes it, this test fails and says so, and the workaround can be retired.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/project-paths.js';
import { extensionLoads } from '../../src/warehouse/lake.js';
import { runPython } from '../support/python.js';

const REPRO = join(PROJECT_ROOT, 'docs', 'repro', 'ducklake-merge-duplicates.sql');

describe('the DuckLake MERGE bug, outside the project', () => {
  it('still leaves duplicates with a CTE and UNION ALL as the source of a MERGE past 2,048 rows', () => {
    const folder = mkdtempSync(join(tmpdir(), 'ducklake-merge-bug-'));
    try {
      const statements = readFileSync(REPRO, 'utf8')
        .split('\n')
        .filter((line) => !line.startsWith('--'))
        .join('\n')
        .replace('LOAD ducklake;\nLOAD sqlite_scanner;', `${extensionLoads().join(';\n')};`);
      const script = [
        'import duckdb, os, sys',
        'os.chdir(sys.argv[1])',
        'con = duckdb.connect()',
        'last = None',
        "for statement in [s for s in sys.argv[2].split(';\\n') if s.strip()]:",
        '    last = con.execute(statement).fetchall()',
        'print(last[0][0], last[0][1])',
      ].join('\n');
      const result = runPython(script, [folder, statements]);
      expect(result.stderr).toBe('');
      const [rows, keys] = result.stdout.trim().split(' ').map(Number);
      expect(keys).toBe(2_600);
      // When this fails with rows = keys, DuckDB fixed the bug: retire the materialized source in src/warehouse/merge.ts.
      expect(rows, 'DuckLake no longer leaves duplicates: the workaround in merge.ts can go').toBeGreaterThan(keys!);
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });
});
