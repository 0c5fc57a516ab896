/**
 * The lake's extensions are hashed for their signatures by the first DuckDB that loads them, not
 * by every one (src/warehouse/extension-files.ts). On copies of the installed files in a folder of
 * the test's own, so the project's record is left alone.
 */
import { appendFileSync, copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeDatabase, openDatabase } from '../../src/warehouse/duckdb.js';
import { EXTENSIONS_DIR, extensionFile, extensionLoadStatements, extensionSettings, extensionsLoaded, signaturesChecked } from '../../src/warehouse/extension-files.js';

const NAMES = ['ducklake', 'sqlite_scanner'];

/** Opens an engine as the lake's code does, loads the extensions of `dir`, and says whether it skipped their signatures. */
async function loadFrom(dir: string): Promise<{ unsigned: boolean }> {
  const db = await openDatabase(':memory:', { settings: extensionSettings(NAMES, dir) });
  try {
    for (const statement of extensionLoadStatements(NAMES, dir)) await db.connection.run(statement);
    await extensionsLoaded(db.connection, NAMES, dir);
    const unsigned = (await db.connection.runAndReadAll("SELECT current_setting('allow_unsigned_extensions')")).getRows()[0]?.[0] === true;
    return { unsigned };
  } finally {
    closeDatabase(db);
  }
}

describe('the extensions\' signatures, checked once per file', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'extension-files-'));
    for (const name of NAMES) copyFileSync(extensionFile(name, EXTENSIONS_DIR), extensionFile(name, dir));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('checks them at the first load, records the files, and skips the check for the same files afterwards', async () => {
    expect(signaturesChecked(NAMES, dir)).toBe(false);
    expect(await loadFrom(dir)).toEqual({ unsigned: false });
    expect(existsSync(join(dir, 'SIGNATURES-CHECKED.json'))).toBe(true);
    expect(signaturesChecked(NAMES, dir)).toBe(true);
    expect(await loadFrom(dir)).toEqual({ unsigned: true });
  });

  it('checks a file changed since again, and DuckDB refuses it when its signature no longer holds', async () => {
    await loadFrom(dir);
    expect(signaturesChecked(NAMES, dir)).toBe(true);
    appendFileSync(extensionFile('sqlite_scanner', dir), Buffer.from([0]));
    expect(signaturesChecked(NAMES, dir)).toBe(false);
    expect(extensionSettings(NAMES, dir)).toEqual({});
    await expect(loadFrom(dir)).rejects.toThrow(/signature|metadata|not a DuckDB extension/i);
    expect(signaturesChecked(NAMES, dir)).toBe(false);
  });
});
