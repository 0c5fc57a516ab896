/**
 * Where a load's time goes, step by step: the fixed cost of a run's final load is the sum of steps
 * that do not depend on the batch's size (open, guards, archive, sync, counts), and a step that grows
 * is found by name, not guessed (bench/peer-dlt.mjs prints them from the run's history, and the
 * worker logs them with each final load). A step timed twice adds up.
 */
export type StepTimings = Record<string, number>;

export class StepTimes {
  readonly #ms = new Map<string, number>();

  /** Runs `work` and adds its time, settled or thrown, to `step`. */
  async time<T>(step: string, work: () => Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      return await work();
    } finally {
      this.add(step, performance.now() - started);
    }
  }

  add(step: string, ms: number): void {
    this.#ms.set(step, (this.#ms.get(step) ?? 0) + ms);
  }

  /** Each step's milliseconds, to a tenth, in the order the steps first ran. */
  toJSON(): StepTimings {
    return Object.fromEntries([...this.#ms].map(([step, ms]) => [step, Math.round(ms * 10) / 10]));
  }
}
