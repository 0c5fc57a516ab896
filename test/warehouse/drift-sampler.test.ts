/**
 * DriftSampler (src/warehouse/schema-drift.ts) as a pure unit: what each schema contract makes of a
 * page answer with a field beyond its resource, lists of items included. The loads that apply it
 * are test/workflows/schema-contract.test.ts's and test/warehouse/schema-drift.test.ts's.
 */
import { describe, expect, it } from 'vitest';
import { DRIFT_SAMPLE, DriftSampler } from '../../src/warehouse/schema-drift.js';
import type { SchemaContracts } from '../../src/harvest/schema-contract.js';

const item = (id: string, extra: Record<string, unknown> = {}) => ({ id, url: `https://x/${id}`, caption: 'c', posted_at: '2026-11-01T00:00:00Z', metrics: { views: 1, likes: 2, comments: 3, ...extra } });
/** A list page as the harvester lands it: run, harvest and endpoint first, data last. */
const page = (harvest: string, data: unknown, observedAt = '2026-11-02T00:00:00Z') =>
  Buffer.from(JSON.stringify({ format: 1, kind: 'page', run_id: 'run-1', harvest, target: 't', page: 1, endpoint: 'tiktok/channel-videos', observed_at: observedAt, data }));

const contracts: SchemaContracts = { frozen: { default: 'freeze' }, cut: { default: 'evolve', resources: { 'channel-videos': 'discard' } }, kept: { default: 'evolve' } };

describe('DriftSampler under each schema contract', () => {
  it('evolve keeps the answer as it came and records the field; freeze sets it aside naming it; discard cuts it from every item', () => {
    const sampler = new DriftSampler(contracts);
    const data = [item('a', { saves: 4 }), item('b')];
    const kept = page('kept', data);
    expect(sampler.consider(kept)).toEqual({ bytes: kept });
    expect(sampler.consider(page('frozen', data))).toEqual({
      rejected: 'schema contract freeze: this tiktok/channel-videos answer carries data.metrics.saves, which the resource\'s schema lacks (data.metrics.saves = 4)',
    });
    const cut = sampler.consider(page('cut', data));
    expect('bytes' in cut && JSON.parse(cut.bytes.toString('utf8')).data).toEqual([item('a'), item('b')]);
    // Data stays the last member: the package's shape is read from the last bytes (extract.ts).
    expect('bytes' in cut && cut.bytes.toString('utf8').endsWith(']}')).toBe(true);
    // A harvest no contract names is under evolve.
    const unnamed = page('unnamed', data);
    expect(sampler.consider(unnamed)).toEqual({ bytes: unnamed });
    expect(sampler.rows().map(({ field_path, contract, answers }) => ({ field_path, contract, answers }))).toEqual([
      { field_path: 'data.metrics.saves', contract: 'evolve', answers: 2 },
      { field_path: 'data.metrics.saves', contract: 'freeze', answers: 1 },
      { field_path: 'data.metrics.saves', contract: 'discard', answers: 1 },
    ]);
  });

  it('compares a sample of each run and endpoint under evolve, and every answer under freeze and discard', () => {
    const sampler = new DriftSampler(contracts);
    const data = [item('a', { saves: 4 })];
    for (let index = 0; index < DRIFT_SAMPLE + 5; index++) for (const harvest of ['kept', 'cut', 'frozen']) sampler.consider(page(harvest, data));
    expect(Object.fromEntries(sampler.rows().map((row) => [row.contract, row.answers]))).toEqual({ evolve: DRIFT_SAMPLE, discard: DRIFT_SAMPLE + 5, freeze: DRIFT_SAMPLE + 5 });
  });
});
