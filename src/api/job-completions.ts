/**
 * Wake-ups for jobs: the webhook receiver calls `notify` when `job.completed` arrives, and a
 * waiting client stops its (slow) polling at once. Without a receiver, waiting is polling alone.
 */
export class JobCompletions {
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly done = new Set<string>();

  notify(jobId: string): void {
    this.done.add(jobId);
    for (const wake of this.waiters.get(jobId) ?? []) wake();
    this.waiters.delete(jobId);
  }

  /** Resolves when `notify(jobId)` has been or is called, or when `signal` aborts. */
  wait(jobId: string, signal: AbortSignal): Promise<void> {
    if (this.done.has(jobId)) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = () => {
        signal.removeEventListener('abort', wake);
        this.waiters.get(jobId)?.delete(wake);
        resolve();
      };
      signal.addEventListener('abort', wake, { once: true });
      const set = this.waiters.get(jobId) ?? new Set();
      set.add(wake);
      this.waiters.set(jobId, set);
    });
  }
}
