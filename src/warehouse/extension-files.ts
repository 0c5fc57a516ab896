import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { DuckDBConnection } from '@duckdb/node-api';
import { TOOLS_DIR } from '../project-paths.js';
import { writeDurableFile } from '../store/durable-file.js';
import { sqlString } from './duckdb.js';

/**
 * The DuckDB extension files the lake needs, where `npm run setup` puts them (from PyPI's
 * duckdb-extension wheels), by the name DuckDB knows each by: they are LOADed by path, since
 * DuckDB cannot download them at run time here.
 *
 * DuckDB checks an extension's signature at every LOAD, by hashing the whole file: about 100 ms of
 * CPU for each of the lake's two (36 and 35 MB), in every process that opens the lake (each load
 * process, `harvester query`, a run's local worker), on a machine of two cores. The check proves
 * the file is the one DuckDB's maintainers signed, and the file does not change after setup. So
 * the first process that loads a set of files with the check on records their identity (device,
 * inode, size, modification time) here; a process that finds the same files still there opens
 * DuckDB with `allow_unsigned_extensions`, which skips the hash. A file replaced or rewritten since
 * has another identity, and is checked again. Hand-written: DuckDB has no setting that trusts one
 * file once checked.
 */
export const EXTENSIONS_DIR = join(TOOLS_DIR, 'duckdb-extensions');

/** Where the identities of the extension files in `dir` whose signatures DuckDB checked are kept. */
function checkedFile(dir: string): string {
  return join(dir, 'SIGNATURES-CHECKED.json');
}

/** The path of the extension DuckDB knows as `name`. */
export function extensionFile(name: string, dir = EXTENSIONS_DIR): string {
  return join(dir, `${name}.duckdb_extension`);
}

/** The statements that load `names` by path, for any DuckDB client of the same version (the tests' Python too). */
export function extensionLoadStatements(names: readonly string[], dir = EXTENSIONS_DIR): string[] {
  return names.map((name) => {
    const file = extensionFile(name, dir);
    if (!existsSync(file)) throw new Error(`no DuckDB extension ${name} at ${file}: run \`npm run setup\`, which installs it from PyPI's duckdb-extension wheels`);
    return `LOAD ${sqlString(file)}`;
  });
}

/** A file's identity: another file, or the same one rewritten, has another. */
function identityOf(file: string): string | undefined {
  try {
    const stat = statSync(file, { bigint: true });
    return `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeNs}`;
  } catch {
    return undefined;
  }
}

function checkedIdentities(dir: string): Record<string, string> {
  try {
    return JSON.parse(readFileSync(checkedFile(dir), 'utf8')) as Record<string, string>;
  } catch {
    return {};
  }
}

/** Whether DuckDB checked the signatures of these very files of `names` before (so a LOAD need not hash them again). */
export function signaturesChecked(names: readonly string[], dir = EXTENSIONS_DIR): boolean {
  const checked = checkedIdentities(dir);
  return names.every((name) => {
    const identity = identityOf(extensionFile(name, dir));
    return identity !== undefined && checked[name] === identity;
  });
}

/**
 * Records that DuckDB loaded `names` with their signatures checked (an engine opened without
 * `allow_unsigned_extensions`). Written whole and renamed, so a reader never sees half of it, and
 * not synced (`durable: false`): a record lost in a crash only costs the next process the check. A
 * folder that cannot be written (a read-only install) keeps every load checked.
 */
function recordSignaturesChecked(names: readonly string[], dir: string): void {
  const checked = checkedIdentities(dir);
  let changed = false;
  for (const name of names) {
    const identity = identityOf(extensionFile(name, dir));
    if (identity !== undefined && checked[name] !== identity) {
      checked[name] = identity;
      changed = true;
    }
  }
  if (!changed) return;
  try {
    writeDurableFile(checkedFile(dir), `${JSON.stringify(checked, null, 2)}\n`, { what: 'record of the extensions whose signatures were checked', durable: false });
  } catch {
    // Not recorded: the next process checks the signatures again, as DuckDB does by default.
  }
}

/** The settings an engine that will load `names` opens with: their signatures not hashed again once checked. */
export function extensionSettings(names: readonly string[], dir = EXTENSIONS_DIR): Record<string, string> {
  return signaturesChecked(names, dir) ? { allow_unsigned_extensions: 'true' } : {};
}

/**
 * `names` are loaded on `connection`: when its engine checked their signatures (it was opened
 * without `allow_unsigned_extensions`), they are recorded as checked. Asked of the engine itself,
 * so a file is recorded only by a load that checked it.
 */
export async function extensionsLoaded(connection: DuckDBConnection, names: readonly string[], dir = EXTENSIONS_DIR): Promise<void> {
  const reader = await connection.runAndReadAll("SELECT current_setting('allow_unsigned_extensions')");
  if (reader.getRows()[0]?.[0] !== true) recordSignaturesChecked(names, dir);
}
