/**
 * Media files, content-addressed: a downloaded file is kept under the SHA-256 of its bytes, so
 * however many runs (or harvests) fetch the same media, it is stored once, and its name proves
 * its content. A file is there whole or not at all (written to a temporary, then renamed).
 *
 * Made durable as a group commit, with the answers: a file is written asynchronously (the event
 * loop never waits on the disk) and fsynced, with its folder, when the run's answers next are
 * (syncStoredMedia, called before the run's segment is: AnswerSegments in landing.ts), not on its
 * own. A killed process loses no file the kernel has; a machine crash may lose the files stored since the
 * last sync, and the answers that name them with them.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, open, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { FileWriteError, temporaryFor } from './durable-file.js';
import { mediaFile } from './layout.js';

/** A stored media file: its hash (its name), its size, and the type its server gave. */
export interface StoredMedia {
  sha256: string;
  bytes: number;
  mime_type: string;
}

/** What the warehouse records of a media file: its hash, size and type. */
export function describeMedia(bytes: Uint8Array, mimeType: string): StoredMedia {
  return { sha256: createHash('sha256').update(bytes).digest('hex'), bytes: bytes.length, mime_type: mimeType };
}

/** Files this process stored and has not fsynced yet, by data directory; and the folders they were made in. */
const unsynced = new Map<string, { files: Set<string>; folders: Set<string> }>();

function unsyncedOf(dataDir: string): { files: Set<string>; folders: Set<string> } {
  const key = resolve(dataDir);
  let entry = unsynced.get(key);
  if (!entry) {
    entry = { files: new Set(), folders: new Set() };
    unsynced.set(key, entry);
  }
  return entry;
}

/** Stores a media file's bytes, unless a file with the same hash is already stored. */
export async function storeMedia(dataDir: string, bytes: Uint8Array, mimeType: string): Promise<StoredMedia> {
  const media = describeMedia(bytes, mimeType);
  const file = mediaFile(dataDir, media.sha256);
  if (existsSync(file)) return media;
  const folder = dirname(file);
  const temporary = temporaryFor(file);
  try {
    const made = await mkdir(folder, { recursive: true });
    await writeFile(temporary, bytes, { flag: 'wx' });
    await rename(temporary, file);
    const pending = unsyncedOf(dataDir);
    pending.files.add(file);
    pending.folders.add(folder);
    // A folder made here is a new name in its parent, which must outlive a crash too.
    if (made !== undefined) {
      pending.folders.add(dirname(folder));
      pending.folders.add(dirname(made));
    }
  } catch (error) {
    await rm(temporary, { force: true }).catch(() => undefined);
    throw new FileWriteError('media file', file, error);
  }
  return media;
}

/** Fsyncs the media files this process stored in `dataDir` since the last call, then their folders. */
export async function syncStoredMedia(dataDir: string): Promise<void> {
  const pending = unsyncedOf(dataDir);
  if (pending.files.size === 0 && pending.folders.size === 0) return;
  const files = [...pending.files];
  const folders = [...pending.folders];
  pending.files.clear();
  pending.folders.clear();
  const sync = async (path: string, data: boolean) => {
    const handle = await open(path, 'r');
    try {
      await (data ? handle.datasync() : handle.sync());
    } finally {
      await handle.close();
    }
  };
  try {
    for (const file of files) await sync(file, true);
    for (const folder of folders) await sync(folder, false);
  } catch (error) {
    // Asked again at the next sync: a file is durable only once a sync of it succeeded.
    for (const file of files) pending.files.add(file);
    for (const folder of folders) pending.folders.add(folder);
    throw new FileWriteError('media file', files[0] ?? folders[0] ?? dataDir, error);
  }
}
