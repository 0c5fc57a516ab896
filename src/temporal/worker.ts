import { join } from 'node:path';
import { bundleWorkflowCode, Worker, type NativeConnection, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { createActivities, type ActivityDeps } from '../../activities/index.js';
import { PROJECT_ROOT } from '../config/project-paths.js';
import { HARVEST_TASK_QUEUE } from '../../workflows/definitions.js';

/** The built workflows (npm run build): bundled for Temporal's sandbox from dist/. */
export const WORKFLOWS_PATH = join(PROJECT_ROOT, 'dist', 'workflows', 'index.js');

/** Bundles the workflows once, for processes that create several workers (tests, benchmarks). */
export function bundleWorkflows(): Promise<WorkflowBundleWithSourceMap> {
  return bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH });
}

export interface HarvestWorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue?: string;
  deps: ActivityDeps;
  bundle?: WorkflowBundleWithSourceMap;
}

export async function createHarvestWorker(options: HarvestWorkerOptions): Promise<Worker> {
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue ?? HARVEST_TASK_QUEUE,
    ...(options.bundle ? { workflowBundle: options.bundle } : { workflowsPath: WORKFLOWS_PATH }),
    activities: createActivities(options.deps),
    // Activities mostly wait on the API: a target's listing, or a job's enrichment with the run's
    // calls in flight inside it. Runs bound their own concurrency (harvest `concurrency`).
    maxConcurrentActivityTaskExecutions: 64,
    // A killed worker's cached workflows move to another worker after this, not the default 10 s.
    stickyQueueScheduleToStartTimeout: '3 seconds',
  });
}
