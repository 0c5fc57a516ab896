/**
 * One billed call's reservations against the budgets across runs that cover its run
 * (src/store/budget-ledger.ts `RunBudgets`), made on the call's own path: right after its fence,
 * right before each attempt goes on the wire (the client's `beforeSend`), as its intent is in the
 * work's journal. An attempt answered with an error status (a 429, a 5xx) was not charged, so the
 * attempt after it keeps its reservation; an attempt whose answer was lost may have been charged,
 * so it keeps its own and the next one takes another. When the call ends, each reservation settles
 * at what the API charged for it, as the journal does: the charge of the answer for every attempt
 * (the same request), nothing for one that cannot have been charged, and the worst case for one
 * whose charge is unknown (counted so, as the run's figures count it).
 */
import { BudgetSpentError } from '../src/api/errors.js';
import type { PriceTable } from '../src/api-catalog/endpoints.js';
import { budgetSpentMessage, periodsAt, periodSpent, type CrossRunBudget } from '../src/harvest/budgets.js';
import type { BudgetLedger, RunBudgets } from '../src/store/budget-ledger.js';

export class CallReservations {
  /** Reservations of attempts whose answers were lost: each may have been charged. */
  private readonly lost: string[] = [];
  /** The reservation of the attempt about to go, or on the wire. */
  private current: string | undefined;

  constructor(
    private readonly budgets: RunBudgets | undefined,
    private readonly key: string,
    private readonly worst: number,
  ) {}

  /** Before an attempt is sent: its worst case reserved, unless it holds a reservation already; a BudgetSpentError if a budget cannot take it. */
  async beforeSend(): Promise<void> {
    if (!this.budgets || this.current !== undefined) return;
    const reserved = await this.budgets.reserve(this.key, this.worst);
    if ('refusal' in reserved) throw new BudgetSpentError(budgetSpentMessage(reserved.refusal), reserved.refusal.budget);
    this.current = reserved.id;
  }

  /** An attempt's answer was lost and the call goes again: its reservation stays, to settle with the call. */
  lostAttempt(): void {
    if (this.current !== undefined) this.lost.push(this.current);
    this.current = undefined;
  }

  /** Answered at `charge`: every attempt's reservation settles at it. */
  async answered(charge: number): Promise<void> {
    await this.settleAll(this.takeLost(), charge);
    await this.settleAll(this.takeCurrent(), charge);
  }

  /**
   * Failed: the last attempt released when the API cannot have charged it (never sent, refused
   * with an error status), settled at `charged` when the API said, at its worst case otherwise;
   * the lost attempts before it at their worst case.
   */
  async failed(neverCharged: boolean, charged: number | undefined): Promise<void> {
    await this.settleAll(this.takeLost(), this.worst);
    const [last] = this.takeCurrent();
    // A release that cannot be written leaves the reservation to its lease: counted at its worst case then.
    if (last !== undefined && neverCharged) await this.budgets?.release(last).catch(() => undefined);
    else if (last !== undefined) await this.settleAll([last], charged ?? this.worst);
  }

  /**
   * Answered by a call the API charges later (a job's start): its reservations are left open, to
   * be settled at the charge when it is known (the job's results, activities/jobs.ts); until then
   * they count as reserved, and past their lease as spent at their worst case. Their ids.
   */
  heldUntilCharged(): string[] {
    return [...this.takeLost(), ...this.takeCurrent()];
  }

  private takeLost(): string[] {
    return this.lost.splice(0);
  }

  private takeCurrent(): string[] {
    const current = this.current;
    this.current = undefined;
    return current === undefined ? [] : [current];
  }

  /** A settlement that cannot be written leaves its reservation to its lease: counted at its worst case then, never lost. */
  private async settleAll(ids: readonly string[], charge: number): Promise<void> {
    for (const id of ids) await this.budgets?.settle(id, charge).catch(() => undefined);
  }
}

/**
 * Why a run must not start: a budget across runs that covers it whose period now cannot pay for
 * one unit of the cheapest call (periodSpent), said with its figures; undefined when none is spent.
 */
export async function spentBudgetOf(ledger: BudgetLedger, budgets: readonly CrossRunBudget[] | undefined, prices: PriceTable, atMs = Date.now()): Promise<string | undefined> {
  if (!budgets || budgets.length === 0) return undefined;
  const figures = await ledger.figures(atMs);
  const cheapest = Math.min(...Object.values(prices).filter((price) => price > 0));
  for (const period of periodsAt(budgets, atMs)) {
    const found = figures.find((candidate) => candidate.budget === period.budget && candidate.period === period.period);
    const current = found ? { ...found, limit: Math.min(found.limit, period.limit), left: Math.max(0, Math.min(found.limit, period.limit) - found.spent - found.reserved) } : undefined;
    if (current && periodSpent(current, cheapest)) {
      return `budget '${period.budget}' is spent for ${period.period}: ${current.spent} spent and ${current.reserved} reserved of ${current.limit} credits; the run was skipped`;
    }
  }
  return undefined;
}
