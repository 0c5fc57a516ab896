import { randomBytes } from 'node:crypto';

/** The API's async pulls: a list request with limit above PAGE_LIMITS.maxSynchronous becomes a job. */

export type JobStatus = 'queued' | 'running' | 'completed' | 'failed';

export interface JobRecord {
  job_id: string;
  status: JobStatus;
  endpoint: string;
  params: Record<string, string>;
  created_at: string;
  item_count: number | null;
  credits_charged: number;
  completed_at: string | null;
  error: { code: string; message: string } | null;
}

export interface StoredJob {
  record: JobRecord;
  apiKey: string;
  requestId: string;
  /** meta.item of the listed endpoint, repeated on results pages. */
  item: string | undefined;
  results: Record<string, unknown>[];
  /** Gathers the job's items from the world when it starts running. */
  pull: () => Record<string, unknown>[];
  /** Results (and their cursors) are kept this long after completion. */
  resultsExpireAtMs: number;
}

export interface JobLifecycle {
  /** Charges for the delivered items; returns an error when the balance cannot cover them. */
  settle(job: StoredJob, items: Record<string, unknown>[]): { credits: number } | { error: { code: string; message: string } };
  finished(job: StoredJob): void;
  nowIso(): string;
  nowMs(): number;
}

export const JOB_RESULTS_RETENTION_MS = 24 * 3_600_000;

export class JobRunner {
  private readonly jobs = new Map<string, StoredJob>();
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(
    private readonly lifecycle: JobLifecycle,
    /** Time from queued to running, and from running to done; short, so tests stay fast. */
    private readonly stepDelayMs: number,
  ) {}

  create(
    apiKey: string,
    requestId: string,
    endpoint: string,
    params: Record<string, string>,
    item: string | undefined,
    pull: () => Record<string, unknown>[],
  ): StoredJob {
    const job: StoredJob = {
      record: {
        job_id: `job_${randomBytes(10).toString('hex')}`,
        status: 'queued',
        endpoint,
        params,
        created_at: this.lifecycle.nowIso(),
        item_count: null,
        credits_charged: 0,
        completed_at: null,
        error: null,
      },
      apiKey,
      requestId,
      item,
      results: [],
      pull,
      resultsExpireAtMs: Number.POSITIVE_INFINITY,
    };
    this.jobs.set(job.record.job_id, job);
    this.later(() => this.run(job));
    return job;
  }

  /** A job of this key, or undefined: other keys' jobs do not exist for it. */
  get(apiKey: string, jobId: string): StoredJob | undefined {
    const job = this.jobs.get(jobId);
    return job && job.apiKey === apiKey ? job : undefined;
  }

  close(): void {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
  }

  private run(job: StoredJob): void {
    job.record.status = 'running';
    const items = job.pull();
    this.later(() => {
      const outcome = this.lifecycle.settle(job, items);
      job.record.completed_at = this.lifecycle.nowIso();
      if ('error' in outcome) {
        job.record.status = 'failed';
        job.record.error = outcome.error;
      } else {
        job.record.status = 'completed';
        job.record.item_count = items.length;
        job.record.credits_charged = outcome.credits;
        job.results = items;
        job.resultsExpireAtMs = this.lifecycle.nowMs() + JOB_RESULTS_RETENTION_MS;
      }
      this.lifecycle.finished(job);
    });
  }

  private later(step: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      step();
    }, this.stepDelayMs);
    this.timers.add(timer);
  }
}
