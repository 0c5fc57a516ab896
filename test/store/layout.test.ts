/**
 * The builders src/store/layout.ts gained when every path and key moved there: each names what the
 * code built by hand before, and the inverses turn a name back into what it was built from.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { commentsTargetKey, itemTargetKey } from '../../src/harvest/targets.js';
import {
  commentsLandingKey, fileOfObjectKey, itemLandingKey, jobStartKey, keyOfFile, keyOfObject, lakeDataFolder, lakeDataPath, landingFile, landingRoot,
  listRunSegments, objectKey, objectPrefix, quarantineFile, quarantineRoot, runSegmentFolder, segmentFileName, pageLandingKey,
} from '../../src/store/layout.js';

describe('layout', () => {
  it('builds enrichment, comments and job keys from the target keys of src/harvest/targets.ts', () => {
    expect(itemLandingKey('run-1', 'tiktok', 'stats', 'https://x/v/1')).toBe(pageLandingKey('run-1', 'item:tiktok:stats:https://x/v/1', 1));
    expect(itemLandingKey('run-1', 'instagram', 'download', 'https://x/p/2', 2)).toBe(pageLandingKey('run-1', itemTargetKey('instagram', 'download', 'https://x/p/2'), 2));
    expect(commentsLandingKey('run-1', 'tiktok', 'https://x/v/1', 3)).toBe(pageLandingKey('run-1', 'comments:tiktok:https://x/v/1', 3));
    expect(commentsTargetKey('tiktok', 'https://x/v/1')).toBe('comments:tiktok:https://x/v/1');
    expect(jobStartKey('search:tiktok:keyword:yoga')).toBe('job:search:tiktok:keyword:yoga');
  });

  it('turns a landing file, a quarantined file and an object back into the key they were named by', () => {
    const dataDir = '/data';
    const key = pageLandingKey('run:1', 'channel:tiktok:a:videos', 7);
    expect(keyOfFile(landingRoot(dataDir), landingFile(dataDir, key))).toBe(key);
    expect(keyOfFile(quarantineRoot(dataDir), quarantineFile(dataDir, key))).toBe(key);
    const prefix = objectPrefix(dataDir, landingRoot(dataDir));
    expect(prefix).toBe('landing/');
    expect(keyOfObject(prefix, objectKey(dataDir, landingFile(dataDir, key)))).toBe(key);
    expect(fileOfObjectKey(dataDir, objectKey(dataDir, landingFile(dataDir, key)))).toBe(landingFile(dataDir, key));
  });

  it("names the lake's data path for DuckLake, in the data directory or under the store's URL", () => {
    expect(lakeDataPath('/data')).toBe(`${lakeDataFolder('/data')}/`);
    expect(lakeDataPath('s3://bucket/prefix/')).toBe('s3://bucket/prefix/lake/data/');
  });

  it("lists a run's segment files in name order, passing over other files; none for a run with no folder", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'layout-'));
    expect(await listRunSegments(dataDir, 'run-1')).toEqual([]);
    const folder = runSegmentFolder(dataDir, 'run-1');
    mkdirSync(folder, { recursive: true });
    const names = [segmentFileName({ writer: 'b-1-x', seq: 2 }), segmentFileName({ writer: 'a-1-x', seq: 1 }), segmentFileName({ writer: 'b-1-x', seq: 1 })];
    for (const name of [...names, '.b-1-x-000003.seg.123-h-ab.tmp', 'stray.txt']) writeFileSync(join(folder, name), '');
    const listed = await listRunSegments(dataDir, 'run-1');
    expect(listed.map((segment) => segment.name)).toEqual([...names].sort());
    expect(listed[0]).toEqual({ name: names[1], file: join(folder, names[1]!), id: `run-1/${names[1]}` });
  });
});
