/**
 * Whether the files the lake's catalog names are whole: each data and delete file of the latest
 * snapshot is there, as long as the catalog says (`file_size_bytes`), and ends in a Parquet footer
 * (its length, then `PAR1`) and begins with `PAR1`. A power loss before lake-sync.ts (an older
 * version's crash) left files of 0 bytes named by the catalog, and a disk fault can cut or zero
 * one: DuckDB then failed every query of the table with "Invalid Input Error: File … ". The check
 * costs one catalog query and, per file, a stat and two reads of 4 and 8 bytes (a few milliseconds
 * for a thousand files); it reads no row. A shared lake's files are objects, each acknowledged
 * whole by the object store before the commit that names it (lake-sync.ts), and an object is never
 * half written; one can still be deleted or overwritten by hand or by a bucket's lifecycle rule:
 * each referenced object is looked for in one listing of the lake's data prefix (a request per
 * 1,000 objects) and its size compared with the catalog's.
 */
import { open } from 'node:fs/promises';
import { storageRootUrl, type ObjectStorageSettings } from '../store/shared/shared-settings.js';
import type { DuckDBConnection } from '@duckdb/node-api';
import { sqlString } from './duckdb.js';

/** A file the latest snapshot reads, as the catalog records it. */
export interface LakeFile {
  table: string;
  kind: 'data' | 'delete';
  path: string;
  /** The size the catalog recorded when the file was written. */
  bytes: number;
  /** A data file's rows (before deletes), or a delete file's deleted rows. */
  rows: number;
  /** The data file it belongs to: its own id for a data file. */
  dataFileId: number;
}

/** A referenced file that is not whole, and how. */
export interface DamagedLakeFile extends LakeFile {
  problem: string;
}

/** The DuckLake metadata catalog of the lake attached as `lake`. */
const META = '__ducklake_metadata_lake';

/**
 * The data and delete files the latest snapshot reads, with their tables. `dataPath` is the data
 * folder the lake was attached with (relative paths are relative to it, through schema and table).
 */
export async function referencedLakeFiles(connection: DuckDBConnection, dataPath: string): Promise<LakeFile[]> {
  const base = `CASE WHEN t.path_is_relative THEN (CASE WHEN s.path_is_relative THEN ${sqlString(dataPath)} || s.path ELSE s.path END) || t.path ELSE t.path END`;
  const joins = `JOIN ${META}.ducklake_table t ON t.table_id = f.table_id AND t.end_snapshot IS NULL
    JOIN ${META}.ducklake_schema s ON s.schema_id = t.schema_id AND s.end_snapshot IS NULL`;
  const full = `CASE WHEN f.path_is_relative THEN ${base} || f.path ELSE f.path END`;
  const reader = await connection.runAndReadAll(
    `SELECT t.table_name, 'data', ${full}, f.file_size_bytes, f.record_count, f.data_file_id FROM ${META}.ducklake_data_file f ${joins} WHERE f.end_snapshot IS NULL
     UNION ALL
     SELECT t.table_name, 'delete', ${full}, f.file_size_bytes, f.delete_count, f.data_file_id FROM ${META}.ducklake_delete_file f ${joins} WHERE f.end_snapshot IS NULL
     ORDER BY 1, 3`,
  );
  return reader.getRows().map(([table, kind, path, bytes, rows, id]) => ({
    table: String(table),
    kind: kind === 'delete' ? 'delete' : 'data',
    path: String(path),
    bytes: Number(bytes),
    rows: Number(rows),
    dataFileId: Number(id),
  }));
}

const MAGIC = Buffer.from('PAR1');

/** What is wrong with one file, or undefined when it is whole (by size and Parquet's magic at both ends). */
export async function fileProblem(file: LakeFile): Promise<string | undefined> {
  let handle;
  try {
    handle = await open(file.path, 'r');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'ENOENT' ? 'missing' : `unreadable (${code ?? (error as Error).message})`;
  }
  try {
    const { size } = await handle.stat();
    if (size !== file.bytes) return `${size} bytes where the catalog says ${file.bytes} (torn)`;
    if (size < 12) return `${size} bytes: too short for Parquet (torn)`;
    const head = Buffer.alloc(4);
    const tail = Buffer.alloc(8);
    await handle.read(head, 0, 4, 0);
    await handle.read(tail, 0, 8, size - 8);
    if (!head.equals(MAGIC) || !tail.subarray(4).equals(MAGIC)) return 'no Parquet magic at its start or end (torn)';
    if (tail.readUInt32LE(0) + 12 > size) return 'its footer is longer than the file (torn)';
    return undefined;
  } finally {
    await handle.close();
  }
}

/** The files of `files` that are not whole, checked a few dozen at a time. */
export async function damagedOf(files: readonly LakeFile[]): Promise<DamagedLakeFile[]> {
  const damaged: DamagedLakeFile[] = [];
  for (let start = 0; start < files.length; start += 64) {
    const slice = files.slice(start, start + 64);
    const problems = await Promise.all(slice.map(fileProblem));
    slice.forEach((file, index) => {
      const problem = problems[index];
      if (problem !== undefined) damaged.push({ ...file, problem });
    });
  }
  return damaged;
}

/** The referenced files of the lake attached to `connection` that are not whole. */
export async function damagedLakeFiles(connection: DuckDBConnection, dataPath: string): Promise<DamagedLakeFile[]> {
  return damagedOf(await referencedLakeFiles(connection, dataPath));
}

/**
 * The referenced objects of a shared lake (attached with `dataPath` in the object store of
 * `settings`) that are missing, or whose size is not the catalog's. A file outside the store's
 * root (a path the catalog names elsewhere) is not checked.
 */
export async function damagedSharedLakeFiles(connection: DuckDBConnection, dataPath: string, settings: ObjectStorageSettings): Promise<DamagedLakeFile[]> {
  const files = await referencedLakeFiles(connection, dataPath);
  if (files.length === 0) return [];
  const root = storageRootUrl(settings);
  // Imported here, not at the top: the S3 client is ~90 ms and ~25 MB of every process that
  // imports the lake (a load process, the CLI's query), and only a shared lake's check needs it.
  const { ObjectStorage } = await import('../store/shared/object-storage.js');
  const objects = new ObjectStorage(settings);
  let sizes: Map<string, number>;
  try {
    sizes = new Map((await objects.listSized(dataPath.slice(root.length))).map(({ key, size }) => [key, size]));
  } finally {
    objects.close();
  }
  const damaged: DamagedLakeFile[] = [];
  for (const file of files) {
    if (!file.path.startsWith(root)) continue;
    const size = sizes.get(file.path.slice(root.length));
    if (size === undefined) damaged.push({ ...file, problem: 'missing' });
    else if (size !== file.bytes) damaged.push({ ...file, problem: `${size} bytes where the catalog says ${file.bytes} (torn)` });
  }
  return damaged;
}

/** One line per damaged file: its table, kind, path and problem. */
export function describeDamage(damaged: readonly DamagedLakeFile[]): string {
  return damaged.map((file) => `table ${file.table}: ${file.kind} file ${file.path} is ${file.problem}`).join('; ');
}

/** A lake whose catalog names files that are not whole: said before any query reads them. */
export class DamagedLakeError extends Error {
  override readonly name = 'DamagedLakeError';
  constructor(readonly damaged: readonly DamagedLakeFile[]) {
    super(
      `the warehouse is damaged: ${describeDamage(damaged)}. ` +
        '`harvester maintain` (and the next load) repairs it: tables derived from the raw answers are rebuilt from them, and what no whole file keeps is reported as lost',
    );
  }
}
