/**
 * The data directory's copies for reading of the media files the lake keeps (`media_files`): the
 * copies are written without fsync as files are fetched (src/store/media-store.ts), so a machine
 * crash may lose one; this writes back every copy that is missing or not whole, from the lake.
 * Reads every hash the lake has, so it runs when asked (`harvester maintain --restore-media`),
 * never as part of a run.
 */
import { statSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { DuckDBBlobValue } from '@duckdb/node-api';
import { mediaFile } from '../store/layout.js';
import { writeMediaCopy } from '../store/media-store.js';
import { sqlString } from './duckdb.js';
import { openLake } from './lake.js';

/** Files read from the lake at once: their bytes are held in memory together. */
const FILES_PER_QUERY = 50;

export interface RestoredMedia {
  /** Media files the lake keeps. */
  files: number;
  /** Copies written back: missing, or of another size than the file's. */
  restored: number;
}

export async function restoreMediaCopies(dataDir: string): Promise<RestoredMedia> {
  const lake = await openLake(dataDir, 'read');
  try {
    const { connection } = lake;
    const files = (await connection.runAndReadAll('SELECT sha256, bytes FROM media_files ORDER BY sha256')).getRows();
    const wanted = files.filter(([sha256, bytes]) => copySize(dataDir, String(sha256)) !== Number(bytes)).map(([sha256]) => String(sha256));
    for (let start = 0; start < wanted.length; start += FILES_PER_QUERY) {
      const chunk = wanted.slice(start, start + FILES_PER_QUERY);
      const reader = await connection.runAndReadAll(`SELECT sha256, mime_type, content FROM media_files WHERE sha256 IN (${chunk.map(sqlString).join(', ')})`);
      for (const [sha256, mimeType, content] of reader.getRows()) {
        const bytes = (content as DuckDBBlobValue).bytes;
        // A copy of another size is a torn one: removed, then written whole.
        await rm(mediaFile(dataDir, String(sha256)), { force: true });
        await writeMediaCopy(dataDir, { sha256: String(sha256), bytes: bytes.length, mime_type: String(mimeType) }, bytes);
      }
    }
    return { files: files.length, restored: wanted.length };
  } finally {
    await lake.close();
  }
}

function copySize(dataDir: string, sha256: string): number | undefined {
  try {
    return statSync(mediaFile(dataDir, sha256)).size;
  } catch {
    return undefined;
  }
}
