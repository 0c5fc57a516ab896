import pLimit, { type LimitFunction } from 'p-limit';

/**
 * One limiter of enrichment calls in flight per run in this worker, shared by all the run's
 * activities here, so a run's `calls` setting bounds its calls however many of its activities
 * the worker runs at once. Dropped when the last of them finishes.
 */
const limiters = new Map<string, { limit: LimitFunction; users: number }>();

export async function withRunCallLimit<T>(runId: string, calls: number, body: (limit: LimitFunction) => Promise<T>): Promise<T> {
  const entry = limiters.get(runId) ?? { limit: pLimit(calls), users: 0 };
  entry.users++;
  limiters.set(runId, entry);
  try {
    return await body(entry.limit);
  } finally {
    if (--entry.users === 0) limiters.delete(runId);
  }
}
