import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadLandings } from '../../src/warehouse/loader.js';
import { structPaths } from '../../src/warehouse/raw-columns.js';
import { queryWarehouse } from '../../src/warehouse/query.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';
import { landedSample } from '../support/sample-harvest.js';
import { landedAnswers } from '../support/landed.js';
import { LocalStore } from '../../src/store/store.js';
import type { PageLanding } from '../../src/store/landing.js';

let emulator: TestEmulator;
beforeAll(async () => {
  emulator = await startTestEmulator();
});
afterAll(() => emulator.close());

const count = async (dataDir: string, sql: string) => Number(Object.values((await queryWarehouse(dataDir, sql)).rows[0]!)[0]);

describe('schema drift', () => {
  it('reads the paths a STRUCT type names, quoted names and lists of structs included', () => {
    expect(structPaths('STRUCT(a VARCHAR, "end" DOUBLE, m STRUCT(x BIGINT, y BIGINT), s STRUCT(t VARCHAR)[])')).toEqual(['$.a', '$.end', '$.m', '$.m.x', '$.m.y', '$.s', '$.s.t']);
  });

  it('records a field the API started to send that no column takes, keeps it in the raw answers, and loads the rest as before', async () => {
    // Loaded without drift first: what the tables hold for the sample.
    const plain = await landedSample(emulator, 'run-plain', mkdtempSync(join(tmpdir(), 'drift-plain-')));
    // And a download as the harvester lands it, with the media file it stored: its own field, no drift.
    const [, download] = [...(landedAnswers(plain.dataDir))].find(([key]) => key.includes('download'))!;
    const stored = { sha256: 'a'.repeat(64), bytes: 12, mime_type: 'video/mp4' };
    const mediaDir = mkdtempSync(join(tmpdir(), 'drift-media-'));
    await new LocalStore(mediaDir).writeLanding({ ...(download as PageLanding), run_id: 'run-media', data: { ...((download as PageLanding).data as object), media: stored } });
    await loadLandings(mediaDir);
    expect(await count(mediaDir, "SELECT count(*) FROM downloads WHERE media_sha256 = repeat('a', 64) AND media_bytes = 12")).toBe(1);
    expect(await count(mediaDir, 'SELECT count(*) FROM schema_drift')).toBe(0);
    await loadLandings(plain.dataDir);
    const rowsOf = async (dataDir: string) =>
      Object.fromEntries(await Promise.all(['items', 'item_metrics', 'api_calls', 'comments', 'transcripts'].map(async (table) => [table, await count(dataDir, `SELECT count(*) FROM ${table}`)])));

    await emulator.admin('faults', { extra_fields: { 'tiktok/stats': { sponsor: { name: 'Acme' } }, 'tiktok/channel-videos': { duet_of: 'v1' } } });
    try {
      const { dataDir, expected } = await landedSample(emulator, 'run-drift', mkdtempSync(join(tmpdir(), 'drift-')));
      const result = await loadLandings(dataDir, { countRun: 'run-drift' });
      expect(result.landingsLoaded).toBe(expected.landings);
      expect(result.quarantined).toEqual([]);
      const drift = result.run!.schemaDrift.map(({ endpoint, field, answers, contract }) => ({ endpoint, field, answers, contract }));
      // Three channel-videos pages and one stats answer carried the new fields; nothing else is drift.
      // A harvest with no schema_contract is under evolve: recorded, and kept.
      expect(drift).toEqual([
        { endpoint: 'tiktok/channel-videos', field: 'data.duet_of', answers: 3, contract: 'evolve' },
        { endpoint: 'tiktok/stats', field: 'data.sponsor', answers: 1, contract: 'evolve' },
        { endpoint: 'tiktok/stats', field: 'data.sponsor.name', answers: 1, contract: 'evolve' },
      ]);
      expect(result.run!.schemaDrift.every((row) => row.firstSeenAt <= row.lastSeenAt)).toBe(true);
      // The run is otherwise what it was: the same rows in every table.
      expect(await rowsOf(dataDir)).toEqual(await rowsOf(plain.dataDir));
      // The answers keep the field, for a rebuild once a column takes it.
      expect(await count(dataDir, "SELECT count(*) FROM raw_answers WHERE endpoint = 'tiktok/stats' AND json_extract_string(answer, '$.data.sponsor.name') = 'Acme'")).toBe(1);
      expect(await count(dataDir, "SELECT count(*) FROM schema_drift WHERE run_id = 'run-drift' AND contract = 'evolve'")).toBe(3);
    } finally {
      await emulator.admin('faults', { extra_fields: {} });
    }
    // And without drift, none is recorded.
    expect(await count(plain.dataDir, 'SELECT count(*) FROM schema_drift')).toBe(0);
  }, 120_000);
});
