import { describe, expect, it } from 'vitest';
import { WorkBudget } from '../../src/harvest/work-budget.js';

/** A journal whose committed credits the test sets: settled charges plus worst cases of calls begun. */
function journal(committed = 0) {
  return { credits: committed, committed() { return this.credits; } };
}

describe('WorkBudget', () => {
  it('frees the grant less what the journal committed and what the work holds', () => {
    const committed = journal(30);
    const budget = new WorkBudget(100, committed);
    expect(budget.free()).toBe(70);
    budget.hold(20);
    expect(budget.free()).toBe(50);
    // A call begun is committed in the journal at its worst case: the budget reads it there.
    committed.credits += 15;
    expect(budget.free()).toBe(35);
    budget.release(20);
    expect(budget.free()).toBe(55);
  });

  it('holds only what is free: tryHold refuses more and holds nothing', () => {
    const budget = new WorkBudget(10, journal(4));
    expect(budget.tryHold(7)).toBe(false);
    expect(budget.free()).toBe(6);
    expect(budget.tryHold(6)).toBe(true);
    expect(budget.free()).toBe(0);
    expect(budget.tryHold(1)).toBe(false);
  });

  it('goes below zero when a crash\'s lost calls committed more than the grant left: nothing more fits', () => {
    const budget = new WorkBudget(10, journal(12));
    expect(budget.free()).toBe(-2);
    expect(budget.tryHold(1)).toBe(false);
  });
});
