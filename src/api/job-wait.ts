import { setTimeout as sleep } from 'node:timers/promises';
import { jobFinished, jobPollWaits } from '../api-catalog/job-polling.js';
import type { Job } from '../api-catalog/resources.js';
import { SocialApiError } from './errors.js';
import type { JobCompletions } from './job-completions.js';

export interface JobWaitOptions {
  /** Wake-ups from the job.completed webhook; polling then only backs it up. */
  completions?: JobCompletions;
  pollMinMs?: number;
  pollMaxMs?: number;
  timeoutMs?: number;
}

/**
 * Waits until the job completes or fails, reading it with `getJob` (free). A `job.completed`
 * webhook (through `completions`) wakes it at once; otherwise it polls with backoff.
 */
export async function waitForJob(getJob: (jobId: string) => Promise<Job>, jobId: string, options: JobWaitOptions = {}): Promise<Job> {
  const deadline = Date.now() + (options.timeoutMs ?? 30 * 60_000);
  const waits = jobPollWaits(options.pollMinMs ?? 250, options.pollMaxMs ?? (options.completions ? 30_000 : 5_000));
  for (;;) {
    const job = await getJob(jobId);
    if (jobFinished(job.status)) return job;
    if (Date.now() >= deadline) throw new SocialApiError(`job ${jobId} is still ${job.status} after waiting`, { code: 'job_wait_timeout' });
    const timer = new AbortController();
    await Promise.race([
      sleep(Math.min(waits.next().value, Math.max(0, deadline - Date.now())), undefined, { signal: timer.signal }).catch(() => undefined),
      options.completions?.wait(jobId, timer.signal) ?? new Promise<void>(() => undefined),
    ]);
    timer.abort();
  }
}
