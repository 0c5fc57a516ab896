import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { AnswerSegments, type PageLanding } from '../../src/store/landing.js';
import { pageLandingKey, runSegmentFile, segmentFileName } from '../../src/store/layout.js';
import { frameOf, readFrameText, readSegment, SegmentWriter } from '../../src/store/segment.js';

const folder = () => mkdtempSync(join(tmpdir(), 'segment-'));

describe('answer segments', () => {
  it('appends arriving together are written together and made durable by one sync, and read back whole, in order', async () => {
    const file = join(folder(), 'run', 'w-1.seg');
    const writer = new SegmentWriter(file, { run_id: 'run-1' });
    const refs = await Promise.all(Array.from({ length: 50 }, (_, index) => writer.append(`run/t/page-${index}.json`, JSON.stringify({ n: index, text: 'é'.repeat(index) }))));
    // 50 appends at once: far fewer groups (each one writev) than appends, and one fdatasync for all.
    expect(writer.frames).toBe(50);
    expect(writer.groups).toBeLessThanOrEqual(2);
    await writer.sync();
    await writer.sync();
    expect(writer.syncs).toBe(1);
    await writer.close();
    const read = await readSegment(file);
    expect(read.header).toEqual({ run_id: 'run-1' });
    expect(read.frames.map((frame) => frame.key)).toEqual(refs.map((ref) => ref.key));
    expect(read.tornBytes).toBe(0);
    expect(read.end).toBe(statSync(file).size);
    for (const [index, frame] of read.frames.entries()) expect(JSON.parse(await readFrameText(file, frame))).toEqual({ n: index, text: 'é'.repeat(index) });
    // A later read from where the first ended finds nothing new.
    expect((await readSegment(file, read.end)).frames).toEqual([]);
  });

  it('a frame cut short or corrupted ends what is read: a torn tail is never taken for an answer', async () => {
    const file = join(folder(), 'w-1.seg');
    const writer = new SegmentWriter(file, { run_id: 'run-1' });
    for (let index = 0; index < 3; index++) await writer.append(`run/t/page-${index}.json`, JSON.stringify({ n: index }));
    await writer.close();
    const whole = statSync(file).size;
    // A fourth frame cut in the middle, as a kill mid-write or a full disk leaves it.
    const fourth = frameOf('run/t/page-3.json', JSON.stringify({ n: 3 }));
    appendFileSync(file, fourth.subarray(0, fourth.length - 5));
    let read = await readSegment(file);
    expect(read.frames).toHaveLength(3);
    expect(read.end).toBe(whole);
    expect(read.tornBytes).toBe(fourth.length - 5);
    // Whole in length but with a byte changed: its checksum does not match.
    truncateSync(file, whole);
    const spoiled = Buffer.from(fourth);
    spoiled.writeUInt8((spoiled.at(-2) as number) ^ 0xff, spoiled.length - 2);
    appendFileSync(file, spoiled);
    read = await readSegment(file);
    expect(read.frames).toHaveLength(3);
    expect(read.tornBytes).toBe(fourth.length);
    // A file cut inside its header is no segment yet.
    const cut = join(folder(), 'w-2.seg');
    writeFileSync(cut, readFileSync(file).subarray(0, 10));
    expect(await readSegment(cut)).toMatchObject({ header: undefined, frames: [] });
  });

  it('a write that fails rejects every append of its group, names the segment, and the writer takes no more', async () => {
    const dir = folder();
    // The segment's folder is a file: the writer cannot make the segment there.
    writeFileSync(join(dir, 'run'), 'not a folder');
    const writer = new SegmentWriter(join(dir, 'run', 'w-1.seg'), { run_id: 'run-1' });
    const appends = [writer.append('run/t/page-1.json', '{}'), writer.append('run/t/page-2.json', '{}')];
    for (const append of appends) await expect(append).rejects.toThrow(/cannot write landing segment .*w-1\.seg/);
    expect(writer.failed).toBe(true);
    await expect(writer.append('run/t/page-3.json', '{}')).rejects.toThrow(/cannot write landing segment/);
  });
});

describe('a data directory\'s segments after a write failed', () => {
  it('said once, then let go: once the folder takes writes again, the run lands and syncs in a new segment', async () => {
    const dataDir = folder();
    const segments = AnswerSegments.of(dataDir);
    const landing = (page: number): PageLanding => ({ format: 1, kind: 'page', run_id: 'run-ro', harvest: 'h', target: 't', page, endpoint: 'tiktok/stats', params: {}, request_id: `r${page}`, observed_at: new Date(0).toISOString(), data: { page } });
    // The run's segment folder cannot be made: a file is in its way (as a read-only folder would refuse it).
    mkdirSync(join(dataDir, 'segments'), { recursive: true });
    writeFileSync(join(dataDir, 'segments', 'run-ro'), 'in the way');
    await expect(segments.land(landing(1))).rejects.toThrow(/cannot write landing segment/);
    // The journal's sync before a checkpoint: nothing of the failed segment was written, so nothing fails.
    await segments.syncRun('run-ro');
    rmSync(join(dataDir, 'segments', 'run-ro'));
    const key = await segments.land(landing(2));
    await segments.syncRun('run-ro');
    expect(await segments.find(key)).toMatchObject({ page: 2 });
    expect(await segments.isLanded(pageLandingKey('run-ro', 't', 1))).toBe(false);
    await segments.close();
  });
});

describe('a standing worker\'s index of landed answers', () => {
  it('lets go of the runs not asked for a while, and still finds their answers from the files', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const dataDir = folder();
    const segments = AnswerSegments.of(dataDir);
    const landing = (run: string): PageLanding => ({ format: 1, kind: 'page', run_id: run, harvest: 'h', target: 't', page: 1, endpoint: 'tiktok/stats', params: {}, request_id: `r-${run}`, observed_at: new Date(0).toISOString(), data: { run } });
    const keys: string[] = [];
    for (let day = 0; day < 5; day++) {
      keys.push(await segments.land(landing(`run-day-${day}`)));
      vi.setSystemTime(Date.now() + 60_000);
    }
    // One run's index at a time: the others were let go as the days passed.
    expect(segments.indexedRuns).toBeLessThanOrEqual(2);
    for (const [day, key] of keys.entries()) expect(await segments.find(key)).toMatchObject({ data: { run: `run-day-${day}` } });
    await segments.close();
    vi.useRealTimers();
  });
});

describe('a run\'s answers as this process looks them up', () => {
  it('finds what another writer lands beside the segment this process writes, and its own answers without reading them back', async () => {
    const dataDir = folder();
    const segments = AnswerSegments.of(dataDir);
    const landing = (target: string, page: number): PageLanding => ({ format: 1, kind: 'page', run_id: 'run-two', harvest: 'h', target, page, endpoint: 'tiktok/channel-videos', params: {}, request_id: `r-${target}-${page}`, observed_at: new Date(0).toISOString(), data: [{ id: `${target}-${page}` }] });
    const own = [await segments.land(landing('mine', 1)), await segments.land(landing('mine', 2))];
    // Not landed by anyone yet: looked for (as a listing does before it buys a page), not found.
    expect(await segments.find(pageLandingKey('run-two', 'theirs', 1))).toBeUndefined();
    // Another process (an attempt of the same work on another worker) lands a page in a segment of its own.
    const theirs = new SegmentWriter(runSegmentFile(dataDir, 'run-two', segmentFileName({ writer: 'other-worker-0001', seq: 1 })), { run_id: 'run-two' });
    await theirs.append(pageLandingKey('run-two', 'theirs', 1), JSON.stringify(landing('theirs', 1)));
    await theirs.close();
    expect(await segments.find(pageLandingKey('run-two', 'theirs', 1))).toMatchObject({ target: 'theirs', page: 1 });
    // This process's own, landed before and after the other writer's.
    own.push(await segments.land(landing('mine', 3)));
    for (const [index, key] of own.entries()) expect(await segments.find(key)).toMatchObject({ target: 'mine', page: index + 1 });
    expect(await segments.find(pageLandingKey('run-two', 'mine', 4))).toBeUndefined();
    await segments.close();
  });
});
