/**
 * The harvest workflow's signals, queries and progress shape: shared by the workflow, the
 * webhook receiver (which signals) and the CLI (which queries).
 */
import { defineQuery, defineSignal } from '@temporalio/workflow';

export type HarvestStatus = 'running' | 'completed' | 'completed_with_errors' | 'budget_exhausted' | 'paused' | 'failed';

export interface TargetProgress {
  key: string;
  status: string;
  items: number;
  pages: number;
  credits: number;
  wanted: number;
  error?: { type: string; message: string; requestId?: string };
}

export interface HarvestProgress {
  runId: string;
  harvest: string;
  status: HarvestStatus;
  startedAt: string;
  budget: number;
  creditsSpent: number;
  creditsReserved: number;
  itemsLanded: number;
  pagesLanded: number;
  targetsDone: number;
  targets: TargetProgress[];
  enrichment: { calls: number; skipped: number; failed: number; pending: number };
  reason?: string;
}

/** Sent by the webhook receiver when `job.completed` arrives for a job this run waits on. */
export const jobCompletedSignal = defineSignal<[{ jobId: string }]>('jobCompleted');

export const progressQuery = defineQuery<HarvestProgress>('progress');

export const HARVEST_TASK_QUEUE = 'harvester';
