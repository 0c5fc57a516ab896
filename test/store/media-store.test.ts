import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { mediaFile } from '../../src/store/layout.js';
import { storeMedia, syncStoredMedia } from '../../src/store/media-store.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('media files, stored by their hash and made durable with the answers', () => {
  it('stores the bytes whole under their SHA-256, once, with no temporary left, and syncs them at the group commit', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'media-store-'));
    dirs.push(dataDir);
    const bytes = Buffer.from('a reel, as bytes');
    const stored = await storeMedia(dataDir, bytes, 'video/mp4');
    expect(stored).toEqual({ sha256: createHash('sha256').update(bytes).digest('hex'), bytes: bytes.length, mime_type: 'video/mp4' });
    expect(readFileSync(mediaFile(dataDir, stored.sha256))).toEqual(bytes);
    expect(await storeMedia(dataDir, bytes, 'video/mp4')).toEqual(stored);
    expect(readdirSync(join(dataDir, 'media', stored.sha256.slice(0, 2)))).toEqual([stored.sha256]);
    await syncStoredMedia(dataDir);
    await syncStoredMedia(dataDir); // nothing left to sync
  });

  it('a media file that cannot be written throws naming it', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'media-store-'));
    dirs.push(dataDir);
    // A file where the media folder should be: no folder can be made under it, whoever runs the test.
    writeFileSync(join(dataDir, 'media'), 'not a folder');
    const bytes = Buffer.from('x');
    const file = mediaFile(dataDir, createHash('sha256').update(bytes).digest('hex'));
    await expect(storeMedia(dataDir, bytes, 'image/jpeg')).rejects.toThrow(`cannot write media file ${file}`);
  });
});
