import { mkdtempSync, statSync, truncateSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'vitest';
import { lakeDataFolder } from '../../src/store/layout.js';
import { openLake, openLakeWriter } from '../../src/warehouse/lake.js';
import { referencedLakeFiles } from '../../src/warehouse/lake-health.js';
import { loadLandings } from '../../src/warehouse/loader.js';
import { startTestEmulator } from '../../test/support/emulator.js';
import { landedSample } from '../../test/support/sample-harvest.js';
it('dbg', async () => {
  const emulator = await startTestEmulator();
  const dataDir = mkdtempSync(join(tmpdir(), 'dbg-'));
  await landedSample(emulator, 'r1', dataDir);
  await loadLandings(dataDir);
  const lake = await openLake(dataDir, 'read');
  const files = await referencedLakeFiles(lake.connection, `${lakeDataFolder(dataDir)}/`);
  console.log(files.map(f => `${f.table} ${f.kind} ${f.path.slice(-60)} ${f.bytes} ${f.rows}`).join('\n'));
  const r = await lake.connection.runAndReadAll("SELECT DISTINCT filename FROM items"); console.log(r.getRows());
  await lake.close();
  const items = files.find(f => f.table === 'items')!;
  truncateSync(items.path, 100);
  const { maintainLake } = await import('../../src/warehouse/maintenance.js');
  const w = await openLakeWriter(dataDir, 1000);
  console.log('damaged', w.damaged);
  for (const sql of ['BEGIN', `SELECT count(*) FROM items WHERE filename NOT IN ('${items.path}')`, `CREATE OR REPLACE TEMP TABLE rw AS SELECT * FROM items WHERE filename NOT IN ('${items.path}')`, 'DROP TABLE items', 'COMMIT']) {
    try { const r = await w.connection.runAndReadAll(sql); console.log('OK', sql, r.getRows()); } catch (e) { console.log('ERR', sql, (e as Error).message); }
  }
  await w.close();
  void maintainLake;
  await emulator.close();
}, 120000);
