/**
 * Media files, content-addressed: a downloaded file is kept under the SHA-256 of its bytes, so
 * however many runs (or harvests) fetch the same media, it is stored once, and its name proves
 * its content. Written durably (writeDurableFile): a file is there whole or not at all.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { writeDurableFile } from './durable-file.js';
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

/** Stores a media file's bytes, unless a file with the same hash is already stored. */
export function storeMedia(dataDir: string, bytes: Uint8Array, mimeType: string): StoredMedia {
  const media = describeMedia(bytes, mimeType);
  const file = mediaFile(dataDir, media.sha256);
  if (!existsSync(file)) writeDurableFile(file, bytes, { what: 'media file' });
  return media;
}
