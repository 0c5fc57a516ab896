/**
 * The ledger of the budgets across runs, on both backends, with the contention of many machines:
 * PostgreSQL (embedded, as the shared store's catalog; each "machine" a store of its own, with its
 * own connections) and the data directory's file (each "machine" a ledger of its own on the same
 * file). Reservations raced from all of them never pass a budget together, a settlement counts
 * once, and a reservation whose lease ran out counts at its worst case until its charge arrives.
 */
import { appendFileSync, chmodSync, existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSharedServices, type SharedServices } from '../../src/cli/shared-services.js';
import { periodsAt, type CrossRunBudget } from '../../src/harvest/budgets.js';
import { FileBudgetLedger, utcMonth, type BudgetLedger } from '../../src/store/budget-ledger.js';
import { budgetLedgerFile } from '../../src/store/layout.js';
import { storeFromEnvironment } from '../../src/store/store-from-environment.js';
import type { Store } from '../../src/store/store.js';

let services: SharedServices;
const stores: Store[] = [];
const savedEnv = { ...process.env };
let databases = 0;

beforeAll(async () => {
  const folder = mkdtempSync(join(tmpdir(), 'budget-ledger-'));
  chmodSync(folder, 0o755);
  services = await startSharedServices(folder);
}, 120_000);
afterAll(async () => {
  process.env = savedEnv;
  for (const store of stores) await store.close();
  await services?.stop();
});

/** `machines` shared stores on one new catalog database: each with connections of its own. */
async function sharedLedgers(machines: number): Promise<BudgetLedger[]> {
  const name = `budgets_${++databases}`;
  const admin = new pg.Client({ connectionString: services.postgres.url });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`).finally(() => admin.end());
  const catalog = new URL(services.postgres.url);
  catalog.pathname = `/${name}`;
  const env = { ...services.environment(name), HARVESTER_CATALOG: catalog.toString() };
  const ledgers: BudgetLedger[] = [];
  for (let machine = 0; machine < machines; machine++) {
    const store = await storeFromEnvironment(mkdtempSync(join(tmpdir(), 'machine-')), { ...savedEnv, ...env });
    stores.push(store);
    ledgers.push(store.budgets);
  }
  return ledgers;
}

function fileLedgers(machines: number): BudgetLedger[] {
  const dataDir = mkdtempSync(join(tmpdir(), 'budget-file-'));
  return Array.from({ length: machines }, () => new FileBudgetLedger(dataDir));
}

const research: CrossRunBudget = { name: 'research', credits: 1_000, per: 'month', timezone: 'Europe/Paris', harvests: 'all' };
const key: CrossRunBudget = { name: 'key', credits: 5_000, per: 'month', timezone: 'UTC', harvests: 'all' };
const periods = periodsAt([research, key], Date.now());
const ofBudget = async (ledger: BudgetLedger, name: string, atMs?: number) => (await ledger.figures(atMs)).find((figures) => figures.budget === name)!;

describe.each([
  ['PostgreSQL, many machines', sharedLedgers],
  ['the data directory, many processes', async (machines: number) => fileLedgers(machines)],
] as const)('the budget ledger in %s', (_where, ledgersOf) => {
  it('never grants more than a budget together, whatever the race, and each grant holds against every budget of it', async () => {
    const ledgers = await ledgersOf(3);
    // 3 machines x 20 calls at 30 credits: 1,800 asked of 1,000.
    const outcomes = await Promise.all(
      ledgers.flatMap((ledger, machine) => Array.from({ length: 20 }, (_, call) => ledger.reserve({ id: `m${machine}-c${call}`, credits: 30, periods, leaseMs: 60_000 }))),
    );
    const granted = outcomes.filter((refusal) => refusal === undefined).length;
    expect(granted).toBe(Math.floor(1_000 / 30));
    for (const refusal of outcomes.filter((outcome) => outcome !== undefined)) expect(refusal).toMatchObject({ budget: 'research', limit: 1_000, asked: 30 });
    for (const ledger of ledgers) {
      expect(await ofBudget(ledger, 'research')).toMatchObject({ spent: 0, reserved: granted * 30, left: 1_000 - granted * 30 });
      expect(await ofBudget(ledger, 'key')).toMatchObject({ spent: 0, reserved: granted * 30 });
    }
  });

  it('settles each reservation once, at its charge; a released one frees its credits', async () => {
    const [one, two] = await ledgersOf(2);
    expect(await one!.reserve({ id: 'a', credits: 300, periods, leaseMs: 60_000 })).toBeUndefined();
    expect(await two!.reserve({ id: 'b', credits: 300, periods, leaseMs: 60_000 })).toBeUndefined();
    await one!.settle('a', 120);
    // The same settlement again, from the other machine (a retry that found the landing): counted once.
    await two!.settle('a', 120);
    await two!.release('b');
    expect(await ofBudget(one!, 'research')).toMatchObject({ spent: 120, reserved: 0, left: 880, expired: 0 });
    expect(await ofBudget(two!, 'key')).toMatchObject({ spent: 120, reserved: 0 });
  });

  it('counts a reservation whose lease ran out (its worker died) as spent at its worst case, until its charge arrives', async () => {
    const [one, two] = await ledgersOf(2);
    expect(await one!.reserve({ id: 'dead', credits: 90, periods, leaseMs: 200 })).toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(await ofBudget(two!, 'research')).toMatchObject({ spent: 90, reserved: 0, expired: 1 });
    // Never released into the budget: another reservation still finds it counted.
    expect(await two!.reserve({ id: 'more', credits: 911, periods, leaseMs: 60_000 })).toMatchObject({ budget: 'research' });
    await two!.settle('dead', 30);
    expect(await ofBudget(one!, 'research')).toMatchObject({ spent: 30, reserved: 0, expired: 0 });
  });
});

describe('the data directory\'s budget ledger, a file per UTC month', () => {
  it('counts the records of the periods now open from this UTC month\'s file and the one before, and reads no older one', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'budget-months-'));
    const now = Date.now();
    const monthStart = Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth(), 1);
    // Half an hour before the UTC month began, it was already this month in Paris: the record is in last month's file.
    const lastMonthEnd = monthStart - 30 * 60_000;
    const twoMonthsAgo = Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth() - 2, 15);
    const parisNow = periodsAt([research], now);
    expect(periodsAt([research], lastMonthEnd)).toEqual(parisNow);
    const write = (atMs: number, records: object[]) => appendFileSync(budgetLedgerFile(dataDir, utcMonth(atMs)), records.map((record) => `${JSON.stringify(record)}\n`).join(''), { flag: 'a' });
    mkdirSync(join(dataDir, 'state'), { recursive: true });
    write(lastMonthEnd, [{ reserve: 'late-october', at: lastMonthEnd, credits: 200, leaseUntil: lastMonthEnd + 60_000, periods: parisNow }, { settle: 'late-october', at: lastMonthEnd + 1_000, credits: 150 }]);
    // A file no period open now can have records in: never read (so what a process reads stays two months, however long it runs).
    write(twoMonthsAgo, [{ reserve: 'not-read', at: twoMonthsAgo, credits: 500, leaseUntil: twoMonthsAgo + 60_000, periods: parisNow }]);
    const ledger = new FileBudgetLedger(dataDir);
    expect(await ofBudget(ledger, 'research')).toMatchObject({ spent: 150, reserved: 0 });
    // A reservation now goes into this month's file, and is decided with last month's records.
    expect(await ledger.reserve({ id: 'now', credits: 850, periods: parisNow, leaseMs: 60_000 })).toBeUndefined();
    expect(await ledger.reserve({ id: 'one-more', credits: 1, periods: parisNow, leaseMs: 60_000 })).toMatchObject({ budget: 'research', spent: 150, reserved: 850 });
    expect(existsSync(budgetLedgerFile(dataDir, utcMonth(now)))).toBe(true);
    await ledger.close();
  });
});
