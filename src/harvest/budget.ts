/**
 * A run's credit budget, as plain arithmetic the workflow can replay: before every billed call the
 * call's worst case is reserved, and once it returns the reservation is settled with the credits
 * actually charged. Spent plus reserved never exceeds the cap, so a run can never overspend.
 */
export interface BudgetState {
  limit: number;
  spent: number;
  reserved: number;
}

export interface Reservation {
  credits: number;
}

export function newBudget(limit: number): BudgetState {
  return { limit, spent: 0, reserved: 0 };
}

export function availableCredits(budget: BudgetState): number {
  return Math.max(0, budget.limit - budget.spent - budget.reserved);
}

export function reserve(budget: BudgetState, credits: number): Reservation {
  if (credits > availableCredits(budget)) {
    throw new Error(`cannot reserve ${credits} credits: only ${availableCredits(budget)} of ${budget.limit} are free`);
  }
  budget.reserved += credits;
  return { credits };
}

/** Settles a reservation with what the call was charged (0 when it failed: failed calls are free). */
export function settle(budget: BudgetState, reservation: Reservation, charged: number): void {
  budget.reserved -= reservation.credits;
  budget.spent += charged;
}

/**
 * How much of the budget a piece of work is granted: its worst case, or all that is free when
 * less is. The grant is held against the budget until the work returns and settles it with what
 * it spent, so work in flight at once can never together spend beyond the budget.
 */
export function grant(free: number, worst: number): number {
  return Math.max(0, Math.min(free, worst));
}
