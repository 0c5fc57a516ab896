import { describe, expect, it } from 'vitest';
import { BudgetBook, budgetForecast, budgetsCovering, cronRunsBetween, monthWindow, periodsAt, periodSpent, type BudgetRecord, type CrossRunBudget } from '../../src/harvest/budgets.js';

const at = (iso: string) => Date.parse(iso);

describe('a month in a time zone', () => {
  it('rolls over at midnight of the first on the wall clock of the zone, not UTC', () => {
    // 23:30 UTC on Oct 31 is already Nov 1 in Paris (UTC+1 in winter).
    expect(monthWindow(at('2026-10-31T23:30:00Z'), 'Europe/Paris').period).toBe('2026-11');
    expect(monthWindow(at('2026-10-31T23:30:00Z'), 'UTC').period).toBe('2026-10');
    // New York is behind: 03:00 UTC on Dec 1 is still Nov 30 there.
    expect(monthWindow(at('2026-12-01T03:00:00Z'), 'America/New_York').period).toBe('2026-11');
  });

  it('starts and ends at the zone’s midnights, across a change of offset inside the month', () => {
    // Paris leaves summer time on Oct 25 2026: October starts at UTC+2 and ends at UTC+1.
    const october = monthWindow(at('2026-10-15T12:00:00Z'), 'Europe/Paris');
    expect(new Date(october.startsAtMs).toISOString()).toBe('2026-09-30T22:00:00.000Z');
    expect(new Date(october.endsAtMs).toISOString()).toBe('2026-10-31T23:00:00.000Z');
    const december = monthWindow(at('2026-12-31T23:59:59Z'), 'Asia/Tokyo');
    expect(december.period).toBe('2027-01');
    expect(new Date(december.startsAtMs).toISOString()).toBe('2026-12-31T15:00:00.000Z');
  });

  it('holds every instant of its month and none of the next', () => {
    const window = monthWindow(at('2026-03-10T00:00:00Z'), 'Australia/Lord_Howe');
    expect(monthWindow(window.startsAtMs, 'Australia/Lord_Howe').period).toBe(window.period);
    expect(monthWindow(window.endsAtMs - 1, 'Australia/Lord_Howe').period).toBe(window.period);
    expect(monthWindow(window.endsAtMs, 'Australia/Lord_Howe').period).not.toBe(window.period);
    expect(monthWindow(window.startsAtMs - 1, 'Australia/Lord_Howe').period).not.toBe(window.period);
  });
});

const research: CrossRunBudget = { name: 'research', credits: 100, per: 'month', timezone: 'Europe/Paris', harvests: ['daily-tiktok', 'weekly-comments'] };
const key: CrossRunBudget = { name: 'key', credits: 150, per: 'month', timezone: 'UTC', harvests: 'all' };

describe('which budgets cover a run', () => {
  it('those that name its harvest, and those of every harvest', () => {
    expect(budgetsCovering([research, key], 'daily-tiktok').map((budget) => budget.name)).toEqual(['research', 'key']);
    expect(budgetsCovering([research, key], 'other').map((budget) => budget.name)).toEqual(['key']);
  });

  it('each in its own period: the month of its own time zone', () => {
    expect(periodsAt([research, key], at('2026-10-31T23:30:00Z'))).toEqual([
      { budget: 'research', period: '2026-11', limit: 100 },
      { budget: 'key', period: '2026-10', limit: 150 },
    ]);
  });
});

const periods = periodsAt([research, key], at('2026-11-10T12:00:00Z'));
const reserve = (id: string, credits: number, atMs = 0, leaseMs = 1_000): BudgetRecord => ({ reserve: id, at: atMs, credits, leaseUntil: atMs + leaseMs, periods });

describe('the reservation arithmetic of the ledger', () => {
  it('grants a reservation only if every budget has room, all or none, naming the one that refused', () => {
    const book = new BudgetBook();
    expect(book.apply(reserve('a', 60))).toBeUndefined();
    expect(book.apply(reserve('b', 40))).toBeUndefined();
    const refusal = book.apply(reserve('c', 1));
    expect(refusal).toEqual({ budget: 'research', period: '2026-11', limit: 100, spent: 0, reserved: 100, asked: 1 });
    expect(book.granted('c')).toBe(false);
    // Refused against research, so nothing was held against key either.
    expect(book.figures(0).find((figures) => figures.budget === 'key')).toMatchObject({ reserved: 100, left: 50 });
  });

  it('settles at the charge once: a second settlement of the same reservation counts nothing', () => {
    const book = new BudgetBook();
    book.apply(reserve('a', 60));
    book.apply({ settle: 'a', at: 1, credits: 45 });
    book.apply({ settle: 'a', at: 2, credits: 45 });
    expect(book.figures(2).find((figures) => figures.budget === 'research')).toEqual({ budget: 'research', period: '2026-11', limit: 100, spent: 45, reserved: 0, left: 55, expired: 0 });
    // The credits the charge left free are free again.
    expect(book.apply(reserve('b', 55, 3))).toBeUndefined();
  });

  it('frees a released reservation entirely', () => {
    const book = new BudgetBook();
    book.apply(reserve('a', 100));
    book.apply({ release: 'a', at: 1 });
    expect(book.figures(1)[0]).toMatchObject({ spent: 0, reserved: 0, left: 100 });
  });

  it('counts a reservation whose lease ran out unsettled as spent at its worst case, until its settlement brings the charge', () => {
    const book = new BudgetBook();
    book.apply(reserve('dead', 30, 0, 1_000));
    expect(book.figures(999)[0]).toMatchObject({ spent: 0, reserved: 30, expired: 0 });
    expect(book.figures(1_000)[0]).toMatchObject({ spent: 30, reserved: 0, left: 70, expired: 1 });
    // Still held against new reservations (its call may have been charged): never lost.
    expect(book.apply(reserve('b', 71, 2_000))).toMatchObject({ budget: 'research', spent: 30 });
    // A late settlement (the woken worker) replaces the worst case by the charge: never counted twice.
    book.apply({ settle: 'dead', at: 3_000, credits: 20 });
    expect(book.figures(3_000)[0]).toMatchObject({ spent: 20, reserved: 0, left: 80, expired: 0 });
  });

  it('judges leases by the records’ own times, so every reader replays the same decisions', () => {
    const records: BudgetRecord[] = [reserve('a', 90, 0, 10), reserve('b', 20, 5), reserve('c', 20, 20)];
    const decisions = () => {
      const book = new BudgetBook();
      return records.map((record) => book.apply(record)?.budget ?? 'granted');
    };
    expect(decisions()).toEqual(['granted', 'research', 'research']);
    expect(decisions()).toEqual(decisions());
  });

  it('calls a period spent when less is left than one unit of the cheapest call', () => {
    expect(periodSpent({ budget: 'b', period: 'p', limit: 10, spent: 9, reserved: 0, left: 1, expired: 0 }, 1)).toBe(false);
    expect(periodSpent({ budget: 'b', period: 'p', limit: 10, spent: 9, reserved: 0, left: 1, expired: 0 }, 2)).toBe(true);
    expect(periodSpent({ budget: 'b', period: 'p', limit: 10, spent: 10, reserved: 0, left: 0, expired: 0 }, 1)).toBe(true);
  });
});

describe('the runs a schedule starts before the month ends', () => {
  it('counts a daily schedule’s runs left in the month, in its own time zone', () => {
    const november = monthWindow(at('2026-11-10T12:00:00Z'), 'Europe/Paris');
    // 06:00 in Paris each day: from Nov 10 at 13:00 Paris, the 11th to the 30th.
    expect(cronRunsBetween('0 6 * * *', 'Europe/Paris', at('2026-11-10T12:00:00Z'), november.endsAtMs)).toBe(20);
    expect(cronRunsBetween('0 6 * * *', 'Europe/Paris', november.startsAtMs, november.endsAtMs)).toBe(30);
  });

  it('reads steps, ranges, lists and cron’s either-day rule', () => {
    const from = at('2026-11-01T00:00:00Z');
    const to = at('2026-12-01T00:00:00Z');
    expect(cronRunsBetween('*/30 9-10 * * *', 'UTC', from, to)).toBe(30 * 4);
    // Mondays of November 2026: 2, 9, 16, 23, 30.
    expect(cronRunsBetween('0 0 * * 1', 'UTC', from, to)).toBe(5);
    // The 1st and 15th, or any Monday: 2 + 5.
    expect(cronRunsBetween('0 0 1,15 * 1', 'UTC', from, to)).toBe(7);
    expect(cronRunsBetween('0 0 * * MON', 'UTC', from, to)).toBeUndefined();
  });

  it('forecasts a budget at month end from what it used and its schedules’ runs left', () => {
    expect(budgetForecast(400, 1_000, [{ harvest: 'a', runsLeft: 3, expectedPerRun: 150 }, { harvest: 'b', runsLeft: 1, expectedPerRun: 200 }], [])).toMatchObject({ credits: 1_050, runsOut: true });
    expect(budgetForecast(400, 1_000, [{ harvest: 'a', runsLeft: 4, expectedPerRun: 150 }], ['b: no schedule'])).toMatchObject({ credits: 1_000, runsOut: false });
  });
});
