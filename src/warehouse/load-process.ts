/**
 * The load as a process of its own, kept warm by src/warehouse/warm-loader.ts: forked with an IPC
 * channel, it takes `{ dataDir }` messages one at a time, loads every pending landing of that data
 * directory, and answers `{ result }` or `{ error }` (and says `{ maintaining }` around the daily
 * maintenance it runs after a run's final load). A run's final load runs here rather than in
 * the worker, so DuckDB's memory (bounded by the batch) never adds to the worker's, which stays
 * flat however many items runs land. Importing the loader (DuckDB's native library) is most of
 * this process's start, which is why it is started before it is needed and then reused.
 */
import { storeFromEnvironment } from '../store/store-from-environment.js';
import type { Store } from '../store/store.js';
import { createLakeEngine } from './lake.js';
import { loadLandings, makeLake } from './loader.js';
import { maintainIfDue } from './maintenance.js';
import type { SchemaContracts } from '../harvest/schema-contract.js';

export interface LoadRequest {
  dataDir: string;
  /** A run whose landings in the lake the answer counts. */
  countRun?: string;
  /** Only make the lake, if it is not made: load nothing. */
  makeLakeOnly?: boolean;
  /** The schema contracts of the harvests whose answers may be pending (loader.ts's LoadOptions). */
  schemaContracts?: SchemaContracts;
}

if (!process.send) {
  process.stderr.write('load-process.js is started by the worker (src/warehouse/warm-loader.ts), with an IPC channel\n');
  process.exit(1);
}
const reply = process.send.bind(process);
// Made as the process starts (the worker starts it ahead of the load), with the lake's extensions
// loaded: every load of this process uses it. One that cannot be made fails each load, saying why.
const engine = createLakeEngine();
engine.catch(() => undefined);

// The store this process's environment names (the worker's, inherited), one per data directory:
// shared storage's landings are staged into the data directory before each load.
const stores = new Map<string, Promise<Store>>();
function storeOf(dataDir: string): Promise<Store> {
  const store = stores.get(dataDir) ?? storeFromEnvironment(dataDir);
  stores.set(dataDir, store);
  // A store that could not be opened (its catalog down for a while) is opened again at the next
  // load, not remembered as failed: every load after an outage failed with the outage's error.
  store.catch(() => {
    if (stores.get(dataDir) === store) stores.delete(dataDir);
  });
  return store;
}

process.on('message', (request: LoadRequest) => {
  const load = Promise.all([engine, storeOf(request.dataDir)]).then(([ready, landings]) =>
    request.makeLakeOnly
      ? makeLake(request.dataDir, { engine: ready, store: landings })
      : loadLandings(request.dataDir, {
          engine: ready,
          store: landings,
          ...(request.countRun === undefined ? {} : { countRun: request.countRun }),
          ...(request.schemaContracts === undefined ? {} : { schemaContracts: request.schemaContracts }),
        }),
  );
  load.then(
    (result) => {
      reply({ result });
      // The scheduled maintenance, once a day, after a run's final load (the one that counts a run)
      // and its answer: the run does not wait for it, and no load of that run is left to meet it. A
      // load asked meanwhile (another run's) waits for it (the store's writer queue: one writer at a
      // time, in this process too), and it writes through this process's engine, as loads do; one
      // cut short is safe, and is done again.
      // The worker is told while it runs, so that it does not replace this process under it (the
      // warm loader's renewal of an idle process): a maintenance longer than the renewal time (a
      // busy machine, a year of tables to compact) was cut short every day and never done.
      if (request.countRun === undefined) return;
      reply({ maintaining: true });
      // A failure is told to the worker (which logs it) as well as written here: this process's
      // stderr reaches a log only when the process dies.
      let failure: string | undefined;
      Promise.all([engine, storeOf(request.dataDir)])
        .then(([ready, store]) => maintainIfDue(request.dataDir, Date.now(), store, ready))
        .catch((error: unknown) => {
          failure = `maintenance of ${request.dataDir} failed: ${error instanceof Error ? error.message : String(error)}`;
          process.stderr.write(`${failure}\n`);
        })
        .finally(() => {
          try {
            reply(failure === undefined ? { maintaining: false } : { maintaining: false, error: failure });
          } catch {
            // The worker went away meanwhile: this process exits on the disconnect.
          }
        });
    },
    (error: unknown) => reply({ error: error instanceof Error ? error.message : String(error) }),
  );
});
// The worker went away (exited, or was killed): stop at once, even mid-load, rather than finish a
// load nobody waits for while the next worker's load waits on the loader's lock. Batches
// commit one by one, so what stops here loads again next time, once.
process.on('disconnect', () => process.exit(0));
