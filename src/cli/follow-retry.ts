/**
 * How often a command following its run asks Temporal again while it does not answer. Apart from
 * run-progress.ts (which loads Temporal's client) so that `harvester run` checks it before its run starts.
 */
import { EnvironmentError } from '../config/environment.js';

/** How long a command following its run waits before asking Temporal again while it does not answer, by default. */
export const DEFAULT_FOLLOW_RETRY_MS = 2_000;

/** HARVESTER_FOLLOW_RETRY_MS, checked; the default when unset. */
export function followRetryMs(env: NodeJS.ProcessEnv = process.env): number {
  const value = env.HARVESTER_FOLLOW_RETRY_MS;
  if (value === undefined || value === '') return DEFAULT_FOLLOW_RETRY_MS;
  const ms = Number(value);
  if (!Number.isInteger(ms) || ms < 1) throw new EnvironmentError(`HARVESTER_FOLLOW_RETRY_MS is ${JSON.stringify(value)}: give a whole number of milliseconds, 1 or more`);
  return ms;
}
