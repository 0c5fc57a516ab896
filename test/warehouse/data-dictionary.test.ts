import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/project-paths.js';
import { closeDatabase, openDatabase } from '../../src/warehouse/duckdb.js';
import { TABLES_DDL, VIEWS_DDL, WAREHOUSE_TABLES, WAREHOUSE_VIEWS } from '../../src/warehouse/schema.js';

/** `## name` (or `## name (view)`) headings, each followed by a `| column | type | meaning |` table. */
function documentedSchema(markdown: string): Map<string, [string, string][]> {
  const relations = new Map<string, [string, string][]>();
  let current: [string, string][] | undefined;
  for (const line of markdown.split('\n')) {
    const heading = /^## (\w+)( \(view\))?$/.exec(line);
    if (heading) {
      current = [];
      relations.set(heading[1]!, current);
      continue;
    }
    if (line.startsWith('## ')) current = undefined;
    const row = /^\| (\w+) \| ([A-Z][A-Z ]*(?:\[\])?) \| .+ \|$/.exec(line);
    if (current && row) current.push([row[1]!, row[2]!]);
  }
  return relations;
}

describe('docs/data-dictionary.md', () => {
  it('documents exactly the real tables and views, column by column, with their types', async () => {
    const documented = documentedSchema(readFileSync(join(PROJECT_ROOT, 'docs', 'data-dictionary.md'), 'utf8'));
    const db = await openDatabase(':memory:');
    try {
      for (const statement of [...TABLES_DDL, ...VIEWS_DDL]) await db.connection.run(statement);
      const reader = await db.connection.runAndReadAll('SELECT table_name, column_name, data_type FROM information_schema.columns ORDER BY table_name, ordinal_position');
      const actual = new Map<string, [string, string][]>();
      for (const [table, column, type] of reader.getRows() as [string, string, string][]) {
        actual.set(table, [...(actual.get(table) ?? []), [column, type]]);
      }
      expect([...documented.keys()].sort()).toEqual([...actual.keys()].sort());
      expect([...actual.keys()].sort()).toEqual([...WAREHOUSE_TABLES, ...WAREHOUSE_VIEWS].sort());
      for (const [relation, columns] of actual) expect(documented.get(relation), relation).toEqual(columns);
    } finally {
      closeDatabase(db);
    }
  });
});
