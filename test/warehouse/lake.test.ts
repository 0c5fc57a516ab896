import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { lakeCatalogFile } from '../../src/store/layout.js';
import { lakeExists, openLakeWriter } from '../../src/warehouse/lake.js';
import { queryWarehouse } from '../../src/warehouse/query.js';

describe('a new lake', () => {
  it('is invisible to readers until its schema is made: a reader finds no warehouse, never a warehouse without tables', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'new-lake-'));
    const seenDuringCreation: string[] = [];
    const writer = await openLakeWriter(dataDir, 1_000, {
      create: async (connection) => {
        await connection.run('CREATE TABLE items (item_id VARCHAR)');
        seenDuringCreation.push(String(await lakeExists(dataDir)));
        seenDuringCreation.push(await queryWarehouse(dataDir, 'SELECT count(*) FROM items').then(() => 'read', (error: Error) => error.message));
      },
    });
    try {
      await writer.connection.run("INSERT INTO items VALUES ('a')");
    } finally {
      await writer.close();
    }
    expect(seenDuringCreation[0]).toBe('false');
    expect(seenDuringCreation[1]).toMatch(/no warehouse at .*catalog\.sqlite yet/);
    expect((await queryWarehouse(dataDir, 'SELECT count(*) AS n FROM items')).rows).toEqual([{ n: '1' }]);
  });

  it('a draft left by a writer killed while making it is thrown away and the lake made again', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'new-lake-'));
    mkdirSync(dirname(lakeCatalogFile(dataDir)), { recursive: true });
    writeFileSync(`${lakeCatalogFile(dataDir)}.new`, 'half a catalog');
    const writer = await openLakeWriter(dataDir, 1_000, { create: async (connection) => void (await connection.run('CREATE TABLE items (item_id VARCHAR)')) });
    await writer.close();
    expect(existsSync(`${lakeCatalogFile(dataDir)}.new`)).toBe(false);
    expect((await queryWarehouse(dataDir, 'SELECT count(*) AS n FROM items')).rows).toEqual([{ n: '0' }]);
  });
});
