import type { CallJournal } from '../src/store/call-journal.js';

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
    readonly journal: CallJournal,
  ) {}

  free(): number {
    return this.grant - this.journal.committed() - this.held;
  }

  hold(credits: number): void {
    this.held += credits;
  }

  release(credits: number): void {
    this.held -= credits;
  }
}
