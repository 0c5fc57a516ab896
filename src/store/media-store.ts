/**
 * Media files, content-addressed by the SHA-256 of their bytes.
 *
 * The durable copy of a downloaded file is a frame among its run's answers (a MediaLanding, key
 * `<run>/_media/<sha256>.json`): made durable in the same group commit as the download's answer
 * that names it (one fdatasync for the group, segment.ts), then loaded into the lake's
 * `media_files`, once per hash, in the snapshot of that answer's rows. A file made durable on its
 * own cost an fdatasync, and the fsync of its folder, per file: for the demo, 280 of its 345 fsyncs.
 *
 * A data directory also keeps a copy for reading, `media/<sha256[0:2]>/<sha256>`, written off the
 * event loop as soon as the file is fetched, whole or not at all (a temporary, then renamed), and
 * never fsynced: the lake holds the file, and `harvester maintain --restore-media`
 * (src/warehouse/media-copies.ts) writes back a copy a machine crash lost.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { FileWriteError, temporaryFor } from './durable-file.js';
import type { MediaLanding } from './landing.js';
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

/** A media file's landing in its run: framed with the run's answers until the lake has it. */
export function mediaLanding(runId: string, media: StoredMedia, bytes: Uint8Array): MediaLanding {
  return { format: 1, kind: 'media', run_id: runId, ...media, content_base64: Buffer.from(bytes).toString('base64') };
}

/**
 * Writes the data directory's copy for reading of a media file, unless one is there: whole or not
 * at all, without fsync (the durable copy is the run's frame, then the lake's row).
 */
export async function writeMediaCopy(dataDir: string, media: StoredMedia, bytes: Uint8Array): Promise<void> {
  const file = mediaFile(dataDir, media.sha256);
  if (existsSync(file)) return;
  const temporary = temporaryFor(file);
  try {
    await mkdir(dirname(file), { recursive: true });
    await writeFile(temporary, bytes, { flag: 'wx' });
    await rename(temporary, file);
  } catch (error) {
    await rm(temporary, { force: true }).catch(() => undefined);
    throw new FileWriteError('media file', file, error);
  }
}
