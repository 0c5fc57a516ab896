/**
 * Media that outlives its link: with `enrich.download`, each media file is fetched while its link
 * lives into the data directory, content-addressed, and stays readable after the link is dead,
 * stored once however many runs fetch it.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, rmSync, truncateSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MediaExpiredError } from '../../src/api/errors.js';
import { resumableState } from '../../src/harvest/checkpoint.js';
import { mediaFile } from '../../src/store/layout.js';
import { restoreMediaCopies } from '../../src/warehouse/media-copies.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import type { HarvestSummary } from '../../workflows/harvest.js';
import { startHarvestRig, type HarvestRig } from '../support/harvest-rig.js';
import { harvestFrom, startTestWorker } from '../support/temporal.js';

let rig: HarvestRig;

beforeAll(async () => {
  rig = await startHarvestRig({ harvest: 'sk_live_media', verify: 'sk_live_media_verify' });
});
afterAll(async () => {
  await rig.close();
});

describe('downloaded media', () => {
  it('is stored once per file, under its hash, and stays readable after its links expire', async () => {
    const worker = await startTestWorker(rig.api);
    try {
      const handle = rig.catalog.instagram.handles[2]!;
      const harvest = (name: string, items: number) =>
        harvestFrom(`
harvests:
  - name: ${name}
    budget: { credits: 100000 }
    enrich: { download: true }
    channels:
      - { platform: instagram, handle: ${handle}, content: reels, max_items: ${items} }
`);
      // Two runs of the channel: the second lists deeper, so it buys the first three downloads again, and one more.
      for (const [name, items] of [['media-a', 3], ['media-b', 4]] as const) {
        const summary = (await rig.temporal.workflow.execute('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId: `${name}-${Date.now()}`, args: [{ harvest: harvest(name, items) }] })) as HarvestSummary;
        expect(summary.status).toBe('completed');
      }
      const downloads = (await queryWarehouse(worker.dataDir, 'SELECT item_id, media_url, mime_type, media_sha256, media_bytes FROM downloads ORDER BY item_id')).rows as {
        item_id: string;
        media_url: string;
        mime_type: string;
        media_sha256: string | null;
        media_bytes: string;
      }[];
      expect(downloads).toHaveLength(7);
      expect(new Set(downloads.map((row) => row.item_id)).size).toBe(4);
      // Each item's file once: one hash per item, as many files in the store as hashes.
      const hashes = new Set(downloads.map((row) => row.media_sha256));
      expect(hashes.size).toBe(4);
      expect(hashes.has(null)).toBe(false);
      const stored = readdirSync(join(worker.dataDir, 'media'), { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile());
      expect(stored.map((entry) => entry.name).sort()).toEqual([...hashes].sort());

      // An hour and more later the links are dead; the files are whole, and each is its item's.
      await rig.emulator.admin('clock', { advance_seconds: 2 * 3600 });
      await expect(rig.api.fetchMedia(downloads[0]!.media_url)).rejects.toBeInstanceOf(MediaExpiredError);
      for (const row of downloads) {
        const bytes = readFileSync(mediaFile(worker.dataDir, row.media_sha256!));
        expect(createHash('sha256').update(bytes).digest('hex')).toBe(row.media_sha256);
        expect(bytes.length).toBe(Number(row.media_bytes));
        expect(bytes.includes(Buffer.from(row.item_id))).toBe(true);
        expect(row.mime_type).toBe('video/mp4');
      }

      // The lake keeps each file once, whole: the durable copy, loaded from the frames the answers came with.
      const kept = (await queryWarehouse(worker.dataDir, "SELECT sha256, bytes::INTEGER AS bytes, sha256(content) AS hashed, mime_type FROM media_files ORDER BY sha256")).rows;
      expect(kept).toEqual(
        [...hashes].sort().map((sha256) => ({ sha256, bytes: Number(downloads.find((row) => row.media_sha256 === sha256)!.media_bytes), hashed: sha256, mime_type: 'video/mp4' })),
      );
      // Copies a machine crash lost (one gone, one torn) are written back from the lake, whole.
      const [gone, torn] = [...hashes].sort() as [string, string];
      rmSync(mediaFile(worker.dataDir, gone));
      truncateSync(mediaFile(worker.dataDir, torn), 3);
      expect(await restoreMediaCopies(worker.dataDir)).toEqual({ files: 4, restored: 2 });
      for (const sha256 of [gone, torn]) expect(createHash('sha256').update(readFileSync(mediaFile(worker.dataDir, sha256))).digest('hex')).toBe(sha256);
      expect(await restoreMediaCopies(worker.dataDir)).toEqual({ files: 4, restored: 0 });
    } finally {
      await worker.stop();
    }
  }, 120_000);

  it('a link that expired before its file was fetched is a failed call, and `retry` asks for a new one, within the budget', async () => {
    const worker = await startTestWorker(rig.api);
    try {
      const handle = rig.catalog.instagram.handles[3]!;
      const harvest = harvestFrom(`
harvests:
  - name: media-expired
    budget: { credits: 100000 }
    enrich: { download: true }
    channels:
      - { platform: instagram, handle: ${handle}, content: reels, max_items: 3 }
`);
      const before = (await rig.emulator.ledger('sk_live_media')).length;
      await rig.emulator.admin('faults', { expired_media_links: 2 });
      const run = (input: object, id: string) => rig.temporal.workflow.execute('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId: id, args: [input] }) as Promise<HarvestSummary>;
      const first = await run({ harvest }, `media-expired-${Date.now()}`);
      // The work's grant held each item's one download: none was free for a second, so two are failed calls.
      expect(first.status).toBe('completed_with_errors');
      expect(first.failedCalls?.total).toBe(2);
      expect(first.failedCalls!.first.map((call) => [call.endpoint, call.reason.startsWith('MediaExpiredError')])).toEqual([
        ['instagram/download', true],
        ['instagram/download', true],
      ]);
      const retried = await run({ harvest, resume: resumableState(first.checkpoint, 1_000) }, `${first.runId}-retry`);
      expect(retried.status).toBe('completed');
      expect(retried.failedCalls).toBeUndefined();

      const charged = (await rig.emulator.ledger('sk_live_media')).slice(before);
      // Three downloads, two of them asked for again: five billed, all in the run's credits and in api_calls.
      const downloads = charged.filter((row) => row.endpoint === 'instagram/download');
      expect(downloads).toHaveLength(5);
      expect(retried.creditsSpent).toBe(charged.reduce((sum, row) => sum + row.credits, 0));
      const calls = await queryWarehouse(worker.dataDir, "SELECT count(*) AS n, sum(credits) AS credits FROM api_calls WHERE endpoint = 'instagram/download'");
      expect(calls.rows[0]).toEqual({ n: '5', credits: String(downloads.reduce((sum, row) => sum + row.credits, 0)) });
      // Every item's file is stored: the expired links' rows have none, their second answers have it.
      const files = (await queryWarehouse(worker.dataDir, 'SELECT item_id, count(media_sha256) AS stored, count(*) AS answers FROM downloads GROUP BY ALL ORDER BY answers')).rows;
      expect(files.map((row) => [row.stored, row.answers])).toEqual([
        ['1', '1'],
        ['1', '2'],
        ['1', '2'],
      ]);
    } finally {
      await worker.stop();
    }
  }, 120_000);

  it('a file the media host could not serve is a failed call, and `retry` asks for the download again and stores it', async () => {
    const worker = await startTestWorker(rig.api);
    try {
      const handle = rig.catalog.instagram.handles[5]!;
      const harvest = harvestFrom(`
harvests:
  - name: media-down
    budget: { credits: 100000 }
    enrich: { download: true }
    channels:
      - { platform: instagram, handle: ${handle}, content: reels, max_items: 3 }
`);
      const run = (input: object, id: string) => rig.temporal.workflow.execute('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId: id, args: [input] }) as Promise<HarvestSummary>;
      await rig.emulator.admin('faults', { media_down: true });
      let first: HarvestSummary;
      try {
        first = await run({ harvest }, `media-down-${Date.now()}`);
      } finally {
        await rig.emulator.admin('faults', { media_down: false });
      }
      // Bought, but no file: not a quiet success.
      expect(first.status).toBe('completed_with_errors');
      expect(first.failedCalls?.total).toBe(3);
      expect(first.failedCalls!.first.every((call) => call.endpoint === 'instagram/download' && call.reason.startsWith('media file not fetched: '))).toBe(true);
      const retried = await run({ harvest, resume: resumableState(first.checkpoint, 1_000) }, `${first.runId}-retry`);
      expect(retried.status).toBe('completed');
      expect(retried.failedCalls).toBeUndefined();
      // Each item's second answer has its file, stored and whole.
      const files = (await queryWarehouse(worker.dataDir, 'SELECT item_id, max(media_sha256) AS sha256, count(media_sha256) AS stored, count(*) AS answers FROM downloads GROUP BY ALL')).rows as {
        sha256: string;
        stored: string;
        answers: string;
      }[];
      expect(files.map((row) => [row.stored, row.answers])).toEqual([
        ['1', '2'],
        ['1', '2'],
        ['1', '2'],
      ]);
      for (const row of files) expect(createHash('sha256').update(readFileSync(mediaFile(worker.dataDir, row.sha256))).digest('hex')).toBe(row.sha256);
    } finally {
      await worker.stop();
    }
  }, 120_000);

  it('fetches every file through transient errors of the media server', async () => {
    const worker = await startTestWorker(rig.api);
    try {
      const handle = rig.catalog.instagram.handles[4]!;
      const harvest = harvestFrom(`
harvests:
  - name: media-faults
    budget: { credits: 100000 }
    enrich: { download: true }
    channels:
      - { platform: instagram, handle: ${handle}, content: reels, max_items: 10 }
`);
      await rig.emulator.admin('faults', { fault_rate: 0.4 });
      let summary: HarvestSummary;
      try {
        summary = (await rig.temporal.workflow.execute('harvestWorkflow', { taskQueue: worker.taskQueue, workflowId: `media-faults-${Date.now()}`, args: [{ harvest }] })) as HarvestSummary;
      } finally {
        await rig.emulator.admin('faults', { fault_rate: 0 });
      }
      expect(summary.status).toBe('completed');
      const files = await queryWarehouse(worker.dataDir, 'SELECT count(*) AS answers, count(media_sha256) AS stored, count(DISTINCT media_sha256) AS distinct_files FROM downloads');
      expect(files.rows[0]).toEqual({ answers: '10', stored: '10', distinct_files: '10' });
    } finally {
      await worker.stop();
    }
  }, 120_000);
});
