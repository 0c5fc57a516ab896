/**
 * Budgets across runs: a cap of credits per calendar month shared by the runs of several harvests
 * (or of every harvest), on top of each run's own budget. The rules here are pure (the workflow
 * sandbox may import them): a month's window in a time zone, which budgets cover a run, and the
 * ledger's arithmetic (`BudgetBook`), replayed the same way by every process that reads the ledger,
 * so each of them reaches the same decision on every reservation.
 *
 * Words: a budget's **period** is one month of it (`2026-11`, in its time zone); a **reservation**
 * is one call's worst case held against every budget that covers its run, from right before the
 * call is sent until it settles at what the API charged, or its lease runs out.
 */

/** A named budget of the config's `budgets:` section. */
export interface CrossRunBudget {
  name: string;
  /** The most the runs it covers may spend in one period, together. */
  credits: number;
  per: 'month';
  /** The IANA time zone the month rolls over in. */
  timezone: string;
  /** The harvests it covers; `all`: every harvest of the config (the whole API key). */
  harvests: string[] | 'all';
}

/** One period of a budget, as a reservation names it: the budget, its month, its limit. */
export interface BudgetPeriod {
  budget: string;
  /** `YYYY-MM`, the month in the budget's time zone. */
  period: string;
  limit: number;
}

/** A month in a time zone: its name and when it starts and ends, in ms since the epoch. */
export interface MonthWindow {
  period: string;
  startsAtMs: number;
  endsAtMs: number;
}

/** The budgets of `budgets` that cover the runs of `harvest`. */
export function budgetsCovering(budgets: readonly CrossRunBudget[], harvest: string): CrossRunBudget[] {
  return budgets.filter((budget) => budget.harvests === 'all' || budget.harvests.includes(harvest));
}

/** The periods a call made at `atMs` is reserved against: each covering budget's month then. */
export function periodsAt(budgets: readonly CrossRunBudget[], atMs: number): BudgetPeriod[] {
  return budgets.map((budget) => ({ budget: budget.name, period: monthWindow(atMs, budget.timezone).period, limit: budget.credits }));
}

/** The wall clock's year, month, day and time at `atMs` in `timeZone` (Intl: the platform's time zone data). */
function wallClock(atMs: number, timeZone: string): { year: number; month: number; day: number; hour: number; minute: number; second: number } {
  const parts = new Intl.DateTimeFormat('en-US', { timeZone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric' }).formatToParts(atMs);
  const part = (type: string) => Number(parts.find((candidate) => candidate.type === type)?.value);
  return { year: part('year'), month: part('month'), day: part('day'), hour: part('hour'), minute: part('minute'), second: part('second') };
}

/** How far `timeZone`'s wall clock is ahead of UTC at `atMs`, in ms (whole seconds). */
function zoneOffsetMs(atMs: number, timeZone: string): number {
  const wall = wallClock(atMs, timeZone);
  const asUtc = Date.UTC(wall.year, wall.month - 1, wall.day, wall.hour, wall.minute, wall.second);
  return asUtc - Math.floor(atMs / 1000) * 1000;
}

/**
 * The instant the wall clock of `timeZone` reads midnight of the first of a month. The offset is
 * read twice: at the first guess, then at the instant it gives, which is right unless a change of
 * offset falls exactly on the month's midnight (then the later reading is the one in force).
 */
function monthStartMs(year: number, month: number, timeZone: string): number {
  const midnightUtc = Date.UTC(year, month - 1, 1);
  const guess = midnightUtc - zoneOffsetMs(midnightUtc, timeZone);
  return midnightUtc - zoneOffsetMs(guess, timeZone);
}

/** The month that holds `atMs` on the wall clock of `timeZone`. */
export function monthWindow(atMs: number, timeZone: string): MonthWindow {
  const { year, month } = wallClock(atMs, timeZone);
  const next = month === 12 ? { year: year + 1, month: 1 } : { year, month: month + 1 };
  return {
    period: `${year}-${String(month).padStart(2, '0')}`,
    startsAtMs: monthStartMs(year, month, timeZone),
    endsAtMs: monthStartMs(next.year, next.month, timeZone),
  };
}

/**
 * A record of the budget ledger. Its order in the ledger is the order of decisions: a reservation
 * is granted if, with every record before it applied, each of its periods can take its credits.
 * `at` is the writer's clock when it wrote the record: leases are judged by the records' own times,
 * so every reader replays the same decisions.
 */
export type BudgetRecord =
  | { reserve: string; at: number; credits: number; leaseUntil: number; periods: BudgetPeriod[]; run?: string }
  | { settle: string; at: number; credits: number }
  | { release: string; at: number };

/** A period's figures: what was charged, what is held now, what is left, what expired unsettled. */
export interface PeriodFigures {
  budget: string;
  period: string;
  limit: number;
  /** Settled charges, plus the worst case of reservations whose lease ran out unsettled. */
  spent: number;
  /** Worst cases of reservations held now (granted, not settled or released, lease running). */
  reserved: number;
  left: number;
  /** Reservations whose lease ran out before they settled: counted in `spent` at their worst case. */
  expired: number;
}

/** A budget whose period cannot take a reservation: which, and its figures when refused. */
export interface BudgetRefusal {
  budget: string;
  period: string;
  limit: number;
  spent: number;
  reserved: number;
  asked: number;
}

interface Reservation {
  credits: number;
  leaseUntil: number;
  periods: string[];
  /** Settled at this charge; undefined while open. */
  settled?: number;
  released?: boolean;
}

interface PeriodTotals {
  budget: string;
  period: string;
  limit: number;
  /** Settled charges. */
  settled: number;
  /** Reservations granted and not yet settled or released, by id. */
  open: Set<string>;
}

const periodKey = (budget: string, period: string) => `${budget}\u0000${period}`;

/**
 * The ledger's state, built by applying its records in order. What it guarantees: a reservation
 * is granted only if every period it names has room for its credits with all other reservations
 * held at their worst case; a settlement replaces a reservation's worst case by its charge once
 * (a second settlement of the same id counts nothing); a reservation whose lease ran out unsettled
 * stops being held and counts as spent at its worst case (its call may have been charged), until a
 * settlement brings its charge, or a release says it never was.
 */
export class BudgetBook {
  private readonly reservations = new Map<string, Reservation>();
  private readonly periods = new Map<string, PeriodTotals>();
  /** Reservations refused, by id, with the budget that refused each. */
  readonly refused = new Map<string, BudgetRefusal>();

  /** Applies one record; for a reservation, returns the refusal when it was refused. */
  apply(record: BudgetRecord): BudgetRefusal | undefined {
    if ('reserve' in record) return this.reserve(record);
    const reservation = this.reservations.get('settle' in record ? record.settle : record.release);
    if (!reservation || reservation.settled !== undefined || reservation.released) return undefined;
    if ('settle' in record) reservation.settled = record.credits;
    else reservation.released = true;
    for (const key of reservation.periods) {
      const totals = this.periods.get(key)!;
      totals.open.delete('settle' in record ? record.settle : record.release);
      if ('settle' in record) totals.settled += record.credits;
    }
    return undefined;
  }

  /** Whether the reservation of this id was granted (and so may be sent). */
  granted(id: string): boolean {
    return this.reservations.has(id);
  }

  /** Each period's figures at `atMs`: reservations whose lease ran out by then count as spent at their worst. */
  figures(atMs: number): PeriodFigures[] {
    return [...this.periods.values()].map((totals) => this.periodFigures(totals, atMs));
  }

  private periodFigures(totals: PeriodTotals, atMs: number): PeriodFigures {
    let reserved = 0;
    let expiredCredits = 0;
    let expired = 0;
    for (const id of totals.open) {
      const reservation = this.reservations.get(id)!;
      if (reservation.leaseUntil > atMs) reserved += reservation.credits;
      else {
        expiredCredits += reservation.credits;
        expired++;
      }
    }
    const spent = totals.settled + expiredCredits;
    return { budget: totals.budget, period: totals.period, limit: totals.limit, spent, reserved, left: Math.max(0, totals.limit - spent - reserved), expired };
  }

  private reserve(record: Extract<BudgetRecord, { reserve: string }>): BudgetRefusal | undefined {
    if (this.reservations.has(record.reserve) || this.refused.has(record.reserve)) return this.refused.get(record.reserve);
    for (const period of record.periods) {
      const totals = this.periods.get(periodKey(period.budget, period.period));
      // The limit a reservation names is its writer's config: the lowest one seen holds.
      const limit = Math.min(period.limit, totals?.limit ?? period.limit);
      const figures = totals ? this.periodFigures(totals, record.at) : { spent: 0, reserved: 0 };
      if (figures.spent + figures.reserved + record.credits > limit) {
        const refusal = { budget: period.budget, period: period.period, limit, spent: figures.spent, reserved: figures.reserved, asked: record.credits };
        this.refused.set(record.reserve, refusal);
        return refusal;
      }
    }
    const keys = record.periods.map((period) => periodKey(period.budget, period.period));
    this.reservations.set(record.reserve, { credits: record.credits, leaseUntil: record.leaseUntil, periods: keys });
    record.periods.forEach((period, index) => {
      const key = keys[index]!;
      const totals = this.periods.get(key) ?? { budget: period.budget, period: period.period, limit: period.limit, settled: 0, open: new Set<string>() };
      totals.limit = Math.min(totals.limit, period.limit);
      totals.open.add(record.reserve);
      this.periods.set(key, totals);
    });
    return undefined;
  }
}

/** The message a run stops with when a budget across runs cannot take its next call. */
export function budgetSpentMessage(refusal: BudgetRefusal): string {
  return `budget '${refusal.budget}' is spent for ${refusal.period}: ${refusal.spent} spent and ${refusal.reserved} reserved of ${refusal.limit} credits, and the next call may cost ${refusal.asked}`;
}

/**
 * Whether a period can no longer pay for anything: less left than `cheapest` (one unit of the
 * cheapest call the run could make). A run covered by such a period is skipped, not started.
 */
export function periodSpent(figures: PeriodFigures, cheapest: number): boolean {
  return figures.left < Math.max(1, cheapest);
}

const CRON_FIELDS = [
  { min: 0, max: 59 },
  { min: 0, max: 23 },
  { min: 1, max: 31 },
  { min: 1, max: 12 },
  { min: 0, max: 7 },
] as const;

/** The values a cron field holds (numbers, `*`, `?`, ranges, steps, lists); undefined for what it cannot read (names such as MON). */
function cronValues(field: string, { min, max }: { min: number; max: number }): Set<number> | undefined {
  const values = new Set<number>();
  for (const part of field.split(',')) {
    const match = /^(\*|\?|(\d+)(?:-(\d+))?)(?:\/(\d+))?$/.exec(part);
    if (!match) return undefined;
    const whole = match[1] === '*' || match[1] === '?';
    const from = whole ? min : Number(match[2]);
    const to = whole ? max : match[3] !== undefined ? Number(match[3]) : match[4] !== undefined ? max : from;
    const step = match[4] !== undefined ? Number(match[4]) : 1;
    if (from < min || to > max || from > to || step < 1) return undefined;
    for (let value = from; value <= to; value += step) values.add(value);
  }
  return values;
}

/**
 * How many times a 5-field cron schedule fires in [fromMs, toMs), on the wall clock of `timeZone`:
 * for a budget's forecast of the runs its schedules still start this month. Undefined for a cron
 * it cannot read (names of days or months): Temporal reads those, this count does not. Hand-written
 * (the project has no cron library; one count per budget and schedule does not need one). A day
 * whose offset changes counts its times at the offset of its noon: an hour off at most, twice a year.
 */
export function cronRunsBetween(cron: string, timeZone: string, fromMs: number, toMs: number): number | undefined {
  const fields = cron.trim().split(/\s+/);
  if (fields.length !== 5) return undefined;
  const sets = fields.map((field, index) => cronValues(field, CRON_FIELDS[index]!));
  if (sets.some((set) => set === undefined)) return undefined;
  const [minutes, hours, days, months, weekdays] = sets as Set<number>[];
  if (weekdays!.has(7)) weekdays!.add(0);
  // Cron's rule: when both the day of the month and the day of the week are restricted, either may match.
  const domRestricted = !(fields[2] === '*' || fields[2] === '?');
  const dowRestricted = !(fields[4] === '*' || fields[4] === '?');
  let count = 0;
  const start = wallClock(fromMs, timeZone);
  for (let day = Date.UTC(start.year, start.month - 1, start.day); day - 14 * 3_600_000 < toMs; day += 86_400_000) {
    const date = new Date(day);
    if (!months!.has(date.getUTCMonth() + 1)) continue;
    const domMatch = days!.has(date.getUTCDate());
    const dowMatch = weekdays!.has(date.getUTCDay());
    if (!(domRestricted && dowRestricted ? domMatch || dowMatch : domMatch && dowMatch)) continue;
    const offset = zoneOffsetMs(day + 12 * 3_600_000 - zoneOffsetMs(day, timeZone), timeZone);
    for (const hour of hours!) {
      for (const minute of minutes!) {
        const at = day + hour * 3_600_000 + minute * 60_000 - offset;
        if (at >= fromMs && at < toMs) count++;
      }
    }
  }
  return count;
}

/** A budget's forecast at the end of its month: what it has spent and holds, and its schedules' runs left at their plans' expected credits. */
export interface BudgetForecast {
  credits: number;
  /** Whether the forecast passes the budget's limit before its month ends. */
  runsOut: boolean;
  /** Per covered harvest with a schedule: its runs left this month and each one's expected credits. */
  harvests: { harvest: string; runsLeft: number; expectedPerRun: number }[];
  /** Covered harvests left out of the forecast, and why (no schedule, a cron this count cannot read). */
  unforecast: string[];
}

export function budgetForecast(used: number, limit: number, harvests: BudgetForecast['harvests'], unforecast: string[]): BudgetForecast {
  const credits = used + harvests.reduce((sum, harvest) => sum + harvest.runsLeft * harvest.expectedPerRun, 0);
  return { credits, runsOut: credits > limit, harvests, unforecast };
}
