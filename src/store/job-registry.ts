import { existsSync, readFileSync } from 'node:fs';
import { writeDurableFile } from './durable-file.js';
import { jobFile, targetJobFile } from './layout.js';

/**
 * Which run waits on which job, on disk in the data directory: the activity that starts a job
 * records it, and the webhook receiver looks it up to signal that run when `job.completed`
 * arrives. A second index by run and target makes starting a job idempotent.
 */
export interface JobRecord {
  jobId: string;
  /** The request that created the job: the job is billed under it when it completes. */
  requestId: string;
  workflowId: string;
  runId: string;
  target: string;
  /**
   * The start's reservations against the budgets across runs (src/store/budget-ledger.ts), left
   * open by the start (it is charged nothing) and settled at the job's charge once its results land.
   */
  budgetReservations?: string[];
}

function readRecord(path: string): JobRecord | undefined {
  return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as JobRecord) : undefined;
}

/** Writes both records whole (writeDurableFile), or throws a FileWriteError naming the file. */
export function registerJob(dataDir: string, record: JobRecord): void {
  for (const path of [jobFile(dataDir, record.jobId), targetJobFile(dataDir, record.runId, record.target)]) {
    writeDurableFile(path, JSON.stringify(record), { what: 'job record' });
  }
}

export function findJob(dataDir: string, jobId: string): JobRecord | undefined {
  return readRecord(jobFile(dataDir, jobId));
}

export function findJobOfTarget(dataDir: string, runId: string, target: string): JobRecord | undefined {
  return readRecord(targetJobFile(dataDir, runId, target));
}
