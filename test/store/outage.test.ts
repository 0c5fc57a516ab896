/**
 * Outages told from failures (src/store/outage.ts): a catalog or object store that does not answer
 * is waited out, up to its bound; what is permanent fails at once.
 */
import { describe, expect, it } from 'vitest';
import { outageOf, OutageTooLongError, storeRidingOutages, waitOutOutages } from '../../src/store/outage.js';

/** The shared store's errors as src/store/shared makes them: a name, a message, and the client's error as cause. */
function storeError(name: 'CatalogError' | 'ObjectStorageError', cause: object): Error {
  const error = new Error(`cannot read a call journal in the catalog postgres://…: ${(cause as Error).message ?? ''}`, { cause });
  error.name = name;
  return error;
}

const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });

describe('outageOf', () => {
  it('tells an unreachable catalog or object store from a permanent failure', () => {
    expect(outageOf(storeError('CatalogError', refused))?.service).toBe('catalog');
    expect(outageOf(storeError('CatalogError', new Error('Connection terminated unexpectedly')))?.service).toBe('catalog');
    expect(outageOf(storeError('CatalogError', Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' })))?.service).toBe('catalog');
    expect(outageOf(storeError('ObjectStorageError', Object.assign(new Error('busy'), { name: 'ServiceUnavailable', $metadata: { httpStatusCode: 503 } })))?.service).toBe('object store');
    expect(outageOf(storeError('ObjectStorageError', refused))?.service).toBe('object store');
    // Permanent: a refused password, a missing bucket, a full disk, a bug.
    expect(outageOf(storeError('CatalogError', Object.assign(new Error('password authentication failed for user "harvester"'), { code: '28P01' })))).toBeUndefined();
    expect(outageOf(storeError('ObjectStorageError', Object.assign(new Error('no bucket'), { name: 'NoSuchBucket', $metadata: { httpStatusCode: 404 } })))).toBeUndefined();
    expect(outageOf(Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' }))).toBeUndefined();
    expect(outageOf(new TypeError('x is undefined'))).toBeUndefined();
    // An outage already waited out to its bound is no longer one to wait for.
    expect(outageOf(new OutageTooLongError({ service: 'catalog', message: 'down' }, 1_000))).toBeUndefined();
  });
});

describe('waitOutOutages', () => {
  it('tries again while the service does not answer, says so, and says when it is back', async () => {
    let tries = 0;
    const said: string[] = [];
    const answer = await waitOutOutages(
      async () => {
        if (++tries < 4) throw storeError('CatalogError', refused);
        return 'rows';
      },
      { boundMs: 10_000, maxDelayMs: 20, waiting: (outage) => said.push(`waiting for the ${outage.service}`), back: (outage) => said.push(`${outage.service} back`) },
    );
    expect(answer).toBe('rows');
    expect(tries).toBe(4);
    expect(said).toEqual(['waiting for the catalog', 'waiting for the catalog', 'waiting for the catalog', 'catalog back']);
  });

  it('fails at once on a permanent failure', async () => {
    let tries = 0;
    const full = Object.assign(new Error('ENOSPC'), { code: 'ENOSPC' });
    await expect(
      waitOutOutages(async () => {
        tries++;
        throw full;
      }, { boundMs: 10_000 }),
    ).rejects.toBe(full);
    expect(tries).toBe(1);
  });

  it('gives up once the outage has lasted its bound, saying so', async () => {
    await expect(waitOutOutages(async () => Promise.reject(storeError('ObjectStorageError', refused)), { boundMs: 200, maxDelayMs: 20 })).rejects.toThrow(
      /the object store did not answer for \d+ s, the longest this worker waits \(HARVESTER_OUTAGE_WAIT_SECONDS\)/,
    );
  });

  it('stops at the caller\'s own deadline with the outage\'s error, for the caller to try again', async () => {
    const failure = storeError('CatalogError', refused);
    await expect(waitOutOutages(async () => Promise.reject(failure), { boundMs: 60_000, stopAtMs: Date.now() + 150, maxDelayMs: 20 })).rejects.toBe(failure);
  });
});

describe('storeRidingOutages', () => {
  it('waits out outages in the store\'s calls and in its journals\' records', async () => {
    let down = 2;
    const flaky = async <T>(value: T) => {
      if (down-- > 0) throw storeError('CatalogError', refused);
      return value;
    };
    const log = { records: () => flaky([{ intent: 'k', worst: 5 }]), append: () => flaky(undefined) };
    const store = {
      dataDir: '/scratch',
      readCoverage: (key: string) => flaky({ key }),
      journals: { journalLog: () => log, runJournalLogs: () => flaky([log]) },
      asLakeWriter: async <T>(work: () => Promise<T>) => work(),
    };
    const riding = storeRidingOutages(store, { boundMs: 5_000, maxDelayMs: 10 });
    expect(riding.dataDir).toBe('/scratch');
    expect(await riding.readCoverage('t')).toEqual({ key: 't' });
    down = 2;
    expect(await riding.journals.journalLog().records()).toEqual([{ intent: 'k', worst: 5 }]);
    down = 2;
    const [again] = await riding.journals.runJournalLogs();
    down = 1;
    await again!.append();
    // The lake writer's work is its caller's: not run again by the store.
    let runs = 0;
    down = 1;
    await expect(riding.asLakeWriter(() => flaky(++runs))).rejects.toThrow(/ECONNREFUSED/);
    expect(runs).toBe(1);
  });

  it('bounds an outage, not each call: a call that meets an outage its store met for longer than the bound fails at once', async () => {
    // Before, each call that met the outage waited a bound of its own: a work whose enrichment calls
    // were queued behind it failed 82 s into an outage with a bound of 3 s.
    let tries = 0;
    let down = true;
    const store = {
      read: async () => {
        tries++;
        if (down) throw storeError('CatalogError', refused);
        return 'rows';
      },
    };
    const riding = storeRidingOutages(store, { boundMs: 200, maxDelayMs: 20 });
    await expect(riding.read()).rejects.toBeInstanceOf(OutageTooLongError);
    expect(tries).toBeGreaterThan(1);
    tries = 0;
    await expect(riding.read()).rejects.toBeInstanceOf(OutageTooLongError);
    expect(tries).toBe(1);
    // No call has met it for three of the longest backoffs (3 × 20 ms): a failure now begins another outage, with its whole bound.
    await new Promise((resolve) => setTimeout(resolve, 100));
    tries = 0;
    await expect(riding.read()).rejects.toBeInstanceOf(OutageTooLongError);
    expect(tries).toBeGreaterThan(1);
    // And once the service answered a call that waited for it (an outage begun afresh), the next failure is a new outage too.
    await new Promise((resolve) => setTimeout(resolve, 100));
    tries = 0;
    const waited = riding.read();
    while (tries === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    down = false;
    expect(await waited).toBe('rows');
    down = true;
    tries = 0;
    await expect(riding.read()).rejects.toBeInstanceOf(OutageTooLongError);
    expect(tries).toBeGreaterThan(1);
  });
});
