/**
 * How a job is waited for: polled until it is finished (completed or failed), each wait twice the
 * last up to a longest, since polling is free but a job may take minutes. A `job.completed` webhook,
 * where there is one, wakes the waiter before its wait is up. Pure, so the client and the workflow
 * (which waits on a signal instead of a timer) can wait alike.
 */
import type { Job } from './resources.js';

export function jobFinished(status: Job['status']): boolean {
  return status === 'completed' || status === 'failed';
}

/** The waits between a job's polls: `firstMs`, then each twice the last, never more than `longestMs`. */
export function* jobPollWaits(firstMs: number, longestMs: number): Generator<number, never> {
  for (let wait = firstMs; ; wait = Math.min(wait * 2, longestMs)) yield wait;
}
