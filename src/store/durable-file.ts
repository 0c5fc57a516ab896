/**
 * Durable whole-file writes, for every file the harvester keeps in its data directory (landings,
 * listing coverage, job records, the credits-low flag, webhook secrets, quarantine reasons).
 *
 * A file counts only once all of it is on disk under its final name: the bytes go to a temporary
 * beside it, every byte (a write may store fewer bytes than it was given, e.g. on a nearly full
 * disk: the loop goes on from there, and a write that stores nothing is an error), then an fsync,
 * then an atomic rename over the final name, then an fsync of the directory. Any failure removes
 * the temporary and throws one error that names the final path and the cause, with the cause's
 * `code` (ENOSPC, EDQUOT, EROFS, EACCES, EPERM, EFBIG, …) and `syscall` kept and the cause itself as
 * `cause`: nothing under the final name is ever a cut-short file.
 *
 * Temporaries are named `.<name>.<pid>-<host>-<random>.tmp` so that `removeStrayTemporaries` can
 * tell an abandoned one (its process gone) from one a live writer is about to rename.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, linkSync, lstatSync, mkdirSync, openSync, readdirSync, renameSync, rmSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { durablyWrittenFolders } from './layout.js';
import { isProcessAlive } from './process-alive.js';

/** `writeSync`'s buffer form: how many of `length` bytes from `offset` it stored. */
export type WriteFunction = (fd: number, buffer: Uint8Array, offset: number, length: number) => number;

/** A failed write of a file in the data directory: names the file, keeps the cause's code. */
export class FileWriteError extends Error {
  readonly code: string | undefined;
  readonly errno: number | undefined;
  readonly syscall: string | undefined;
  /** The file that could not be written (its final name, not a temporary). */
  readonly path: string;

  constructor(what: string, path: string, cause: unknown) {
    const error = cause as NodeJS.ErrnoException | undefined;
    super(`cannot write ${what} ${path}: ${error instanceof Error ? error.message : String(cause)}`, { cause });
    this.name = 'FileWriteError';
    this.path = path;
    this.code = error?.code;
    this.errno = error?.errno;
    this.syscall = error?.syscall;
  }
}

/**
 * Writes all of `data` at the file's current position, looping on short writes. A write that
 * stores nothing is taken as a full disk (ENOSPC), as coreutils' full_write does: looping on it
 * would never end.
 */
export function writeFully(fd: number, data: Uint8Array, write: WriteFunction = writeSync): void {
  let offset = 0;
  while (offset < data.length) {
    const written = write(fd, data, offset, data.length - offset);
    if (!(written > 0)) {
      throw Object.assign(new Error(`ENOSPC: write stored nothing of ${data.length - offset} bytes left, write`), { code: 'ENOSPC', syscall: 'write' });
    }
    offset += written;
  }
}

export interface DurableWriteOptions {
  /** What the file is, for the error message: `landing`, `job record`, … */
  what: string;
  /** Permission bits of a new file (before the umask); 0o666 unless given. */
  mode?: number;
  /** For tests: the write system call. */
  write?: WriteFunction;
  /**
   * Written only when no file has the name yet (the first of several writers wins, whole): the
   * temporary is linked to the name, which fails when it exists, instead of renamed over it.
   */
  exclusive?: boolean;
  /**
   * False for a file that only processes alive at the same time read, which a machine crash ends
   * together: written whole and atomically as any other, but neither it nor its folder fsynced.
   */
  durable?: boolean;
}

/**
 * Writes a whole file durably and atomically (see the module's comment), or throws a FileWriteError.
 * Returns false when `exclusive` and a file had the name already: that file is left as it was.
 */
export function writeDurableFile(path: string, data: string | Uint8Array, options: DurableWriteOptions): boolean {
  const directory = dirname(path);
  const temporary = temporaryFor(path);
  const bytes = typeof data === 'string' ? Buffer.from(data) : data;
  let fd: number | undefined;
  try {
    if (options.durable ?? true) makeDurableDirectory(directory);
    else mkdirSync(directory, { recursive: true });
    fd = openSync(temporary, 'wx', options.mode ?? 0o666);
    writeFully(fd, bytes, options.write);
    const durable = options.durable ?? true;
    if (durable) fsyncSync(fd);
    // Closed before the rename, and its error counted: some file systems (NFS) report a failed
    // write only at close.
    const closing = fd;
    fd = undefined;
    closeSync(closing);
    if (options.exclusive) {
      try {
        linkSync(temporary, path);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        rmSync(temporary, { force: true });
        return false;
      }
      rmSync(temporary, { force: true });
    } else renameSync(temporary, path);
    if (durable) syncDirectory(directory);
    return true;
  } catch (error) {
    if (fd !== undefined) {
      try {
        closeSync(fd);
      } catch {
        // The write's error is the one to report.
      }
    }
    try {
      rmSync(temporary, { force: true });
    } catch {
      // Left behind, it is removed at the next worker start (removeStrayTemporaries).
    }
    throw new FileWriteError(options.what, path, error);
  }
}

/**
 * `mkdir -p` whose new folders survive a machine crash: each folder it makes is a new name in its
 * parent, so each such parent is fsynced once the folders below it are made (the deepest first).
 * Folders already there cost one stat and no fsync. Returns the folders it made.
 */
export function makeDurableDirectory(directory: string): string[] {
  const made: string[] = [];
  for (let folder = directory; !isDirectory(folder); folder = dirname(folder)) {
    made.unshift(folder);
    if (dirname(folder) === folder) break;
  }
  for (const folder of made) {
    try {
      mkdirSync(folder);
    } catch (error) {
      // Made meanwhile by another writer: its name is as new, and synced below all the same.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
  for (const folder of [...made].reverse()) syncDirectory(dirname(folder));
  return made;
}

function isDirectory(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
}

/** Fsyncs a directory, so the names created or renamed in it survive a machine crash. */
export function syncDirectory(directory: string): void {
  const fd = openSync(directory, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** A short tag of this machine's name: a pid means something only on the host it was taken on. */
const HOST_TAG = tagOf(hostname());

function tagOf(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return hash.toString(36);
}

export function temporaryFor(path: string): string {
  return join(dirname(path), `.${basename(path)}.${process.pid}-${HOST_TAG}-${randomBytes(4).toString('hex')}.tmp`);
}

const TEMPORARY_NAME = /\.(\d+)-([0-9a-z]+)-[0-9a-f]+\.tmp$/;

/**
 * A temporary whose writer cannot be told alive is removed once it is this old. A writer holds its
 * temporary for the time of one write and one fsync, so this is long past any real one.
 */
export const STRAY_TEMPORARY_AGE_MS = 15 * 60_000;

/**
 * Removes the temporaries that interrupted writes left in the data directory (a kill, a crash, a
 * full disk whose clean-up failed): files ending in `.tmp` under the folders written through
 * writeDurableFile. Called when a worker starts. A temporary is removed when the process named in
 * it is gone (same host, pid not alive), or, when that cannot be told (another host, a name from
 * an earlier version without a pid), once it is older than STRAY_TEMPORARY_AGE_MS. Removing a
 * temporary that a writer still meant to rename could only fail that write (its rename throws, so
 * nothing counts it), never lose or cut a file. Returns the paths removed.
 */
export function removeStrayTemporaries(dataDir: string, now = Date.now()): string[] {
  const removed: string[] = [];
  const walk = (directory: string) => {
    let entries;
    try {
      entries = readdirSync(directory, { withFileTypes: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT' || (error as NodeJS.ErrnoException).code === 'ENOTDIR') return;
      throw error;
    }
    for (const entry of entries) {
      const path = join(directory, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile() && entry.name.endsWith('.tmp') && isStray(path, entry.name, now)) {
        rmSync(path, { force: true });
        removed.push(path);
      }
    }
  };
  for (const folder of durablyWrittenFolders(dataDir)) walk(folder);
  return removed;
}

function isStray(path: string, name: string, now: number): boolean {
  const match = TEMPORARY_NAME.exec(name);
  if (match && match[2] === HOST_TAG && !isProcessAlive(Number(match[1]))) return true;
  try {
    return now - lstatSync(path).mtimeMs > STRAY_TEMPORARY_AGE_MS;
  } catch {
    return false;
  }
}

