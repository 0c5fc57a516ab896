/**
 * Which store a process keeps its data in: a data directory, or a shared store (object storage with
 * its PostgreSQL catalog). A run carries the identity of the store it was started for, and a worker
 * whose store has another refuses the run's tasks (activities/run-guard.ts), so a run's data lands,
 * and its coverage and known items are read, only where it was asked.
 *
 * The identity is an id made at random the first time a store is asked for it, and kept in the
 * store (a data directory's state/store-id.json, a shared catalog's document), not its path or URL:
 * one directory reached by two paths (a symlink, a container's mount) is one store, and two
 * machines' directories at the same path are two. The location is for messages only.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { writeDurableFile } from './durable-file.js';
import { storeIdFile } from './layout.js';

export interface StoreIdentity {
  /** Made once per store, at random (a UUID). */
  id: string;
  /** Where the store is, as the process that named it sees it, for messages: never a secret. */
  location: string;
}

/** The content of a data directory's store id file. */
interface StoreIdFile {
  id: string;
  created_at: string;
}

export class StoreIdentityError extends Error {
  override readonly name = 'StoreIdentityError';
}

export function sameStore(a: StoreIdentity, b: StoreIdentity): boolean {
  return a.id === b.id;
}

export function dataDirectoryLocation(dataDir: string): string {
  return `the data directory ${resolve(dataDir)}`;
}

/**
 * The id of a data directory, written once when it has none: the first of several
 * processes to write it wins, whole, and every process reads the winner's (writeDurableFile's
 * `exclusive`). `create: false` reads only, and returns undefined when the directory has no id.
 */
export function dataDirectoryIdentity(dataDir: string, options: { create: false }): StoreIdentity | undefined;
export function dataDirectoryIdentity(dataDir: string, options?: { create?: true }): StoreIdentity;
export function dataDirectoryIdentity(dataDir: string, options: { create?: boolean } = {}): StoreIdentity | undefined {
  const file = storeIdFile(dataDir);
  let text = readIfThere(file);
  if (text === undefined) {
    if (options.create === false) return undefined;
    const made: StoreIdFile = { id: randomUUID(), created_at: new Date().toISOString() };
    writeDurableFile(file, `${JSON.stringify(made, null, 2)}\n`, { what: 'store id', exclusive: true });
    text = readIfThere(file);
  }
  let id: unknown;
  try {
    id = (JSON.parse(text ?? '') as Partial<StoreIdFile>).id;
  } catch {
    id = undefined;
  }
  if (typeof id !== 'string' || id === '') {
    throw new StoreIdentityError(`the store id file ${file} holds no id: remove it to make a new one (runs started for the old id are then refused here)`);
  }
  return { id, location: dataDirectoryLocation(dataDir) };
}

function readIfThere(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    // Not there (ENOTDIR: a file where a folder on its path should be): writing it says why it cannot be.
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    // Node's error names the file, and keeps its code (EACCES, …) for the caller.
    throw error;
  }
}

/** A new id, for a shared store's catalog document. */
export function newStoreId(): string {
  return randomUUID();
}
