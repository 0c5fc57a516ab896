/**
 * The load as a process of its own: `node dist/src/warehouse/load-process.js <data dir>` loads every
 * pending landing and prints the result as one JSON line. A run's final load runs here rather than
 * in the worker, so DuckDB's memory (bounded by the batch) comes and goes with the load and never
 * adds to the worker's, which stays flat however many items runs land.
 */
import { loadLandings } from './loader.js';

const dataDir = process.argv[2];
if (!dataDir) {
  process.stderr.write('usage: load-process.js <data dir>\n');
  process.exit(1);
}
try {
  const result = await loadLandings(dataDir);
  process.stdout.write(`${JSON.stringify(result)}\n`);
} catch (error) {
  process.stderr.write(`${(error as Error).message}\n`);
  process.exit(1);
}
