/**
 * The credits one piece of work may spend inside its activity: the grant the workflow gave it
 * (workflows/bracket.ts), less what its call journal has committed, less what it holds for calls it
 * is about to make. Pure arithmetic over the journal's committed total, so it is unit-tested
 * without a worker (test/harvest/work-budget.test.ts).
 */

/** What the budget reads of a work's call journal: settled charges plus the worst case of calls begun. */
export interface CommittedCredits {
  committed(): number;
}

/**
 * The credits one activity's work may spend: the grant the workflow gave it, less what its journal
 * has committed (settled charges and the worst case of calls begun), less what it holds for calls
 * it is about to make (a landed page's enrichment). Every call's worst case is inside the grant
 * before it is sent, so the work never spends beyond it, in flight or after a crash.
 */
export class WorkBudget {
  private held = 0;

  constructor(
    readonly grant: number,
    readonly journal: CommittedCredits,
  ) {}

  free(): number {
    return this.grant - this.journal.committed() - this.held;
  }

  hold(credits: number): void {
    this.held += credits;
  }

  /** Holds `credits` if the grant still has them free; false, holding nothing, if not. */
  tryHold(credits: number): boolean {
    if (credits > this.free()) return false;
    this.hold(credits);
    return true;
  }

  release(credits: number): void {
    this.held -= credits;
  }
}
