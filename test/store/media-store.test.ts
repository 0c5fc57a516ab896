import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AnswerSegments, type MediaLanding } from '../../src/store/landing.js';
import { mediaFile, mediaLandingKey } from '../../src/store/layout.js';
import { readSegment } from '../../src/store/segment.js';
import { LocalStore } from '../../src/store/store.js';

const dirs: string[] = [];
const stores: LocalStore[] = [];
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
  for (const dir of dirs.splice(0)) {
    await AnswerSegments.of(dir).close();
    rmSync(dir, { recursive: true, force: true });
  }
});

function dataDirectory(): { dataDir: string; store: LocalStore } {
  const dataDir = mkdtempSync(join(tmpdir(), 'media-store-'));
  dirs.push(dataDir);
  const store = new LocalStore(dataDir);
  stores.push(store);
  return { dataDir, store };
}

describe('media files, framed with the run\'s answers and copied for reading', () => {
  it('frames the bytes in the run\'s segment under the hash, made durable by the run\'s sync, and writes one copy under the SHA-256, no temporary left', async () => {
    const { dataDir, store } = dataDirectory();
    const bytes = Buffer.from('a reel, as bytes');
    const stored = await store.storeMedia('run-media', bytes, 'video/mp4');
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    expect(stored).toEqual({ sha256, bytes: bytes.length, mime_type: 'video/mp4' });
    expect(readFileSync(mediaFile(dataDir, sha256))).toEqual(bytes);
    expect(await store.storeMedia('run-media', bytes, 'video/mp4')).toEqual(stored);
    expect(readdirSync(join(dataDir, 'media', sha256.slice(0, 2)))).toEqual([sha256]);
    const framed = (await store.findLanding(mediaLandingKey('run-media', sha256))) as MediaLanding;
    expect(framed).toMatchObject({ kind: 'media', run_id: 'run-media', sha256, mime_type: 'video/mp4', bytes: bytes.length });
    expect(Buffer.from(framed.content_base64, 'base64')).toEqual(bytes);
    // The frame is in the run's segment on disk once the run's answers are synced.
    const segments = AnswerSegments.of(dataDir);
    await segments.syncRun(mediaLandingKey('run-media', sha256).split('/')[0]!);
    const folder = join(dataDir, 'segments', 'run-media');
    const [segment] = readdirSync(folder);
    expect((await readSegment(join(folder, segment!))).frames.map((frame) => frame.key)).toContain(mediaLandingKey('run-media', sha256));
  });

  it('a media copy that cannot be written throws naming it', async () => {
    const { dataDir, store } = dataDirectory();
    // A file where the media folder should be: no folder can be made under it, whoever runs the test.
    writeFileSync(join(dataDir, 'media'), 'not a folder');
    const bytes = Buffer.from('x');
    const file = mediaFile(dataDir, createHash('sha256').update(bytes).digest('hex'));
    await expect(store.storeMedia('run-media', bytes, 'image/jpeg')).rejects.toThrow(`cannot write media file ${file}`);
  });
});
