import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Worker, type NativeConnection } from '@temporalio/worker';
import { createActivities, type ActivityDeps } from '../../activities/index.js';
import { PROJECT_ROOT } from '../project-paths.js';
import { HARVEST_TASK_QUEUE } from '../../workflows/definitions.js';
import { removeStrayTemporaries } from '../store/durable-file.js';

/** The built workflows (npm run build), for replaying histories against them. */
export const WORKFLOWS_PATH = join(PROJECT_ROOT, 'dist', 'workflows', 'index.js');

/** The workflows bundled for Temporal's sandbox at build time (scripts/bundle-workflows.mjs). */
export const WORKFLOW_BUNDLE_PATH = join(PROJECT_ROOT, 'dist', 'workflow-bundle.js');

/**
 * The prebuilt workflow bundle, checked: bundling at every worker start cost about 3 s, so workers
 * load the one `npm run build` made. A missing bundle, or one older than any compiled module it
 * was made of (tsc run without the bundling step), would run no code or old code, so both are
 * refused.
 */
export function prebuiltWorkflowBundle(): { codePath: string } {
  let bundled: number;
  let code: string;
  try {
    bundled = statSync(WORKFLOW_BUNDLE_PATH).mtimeMs;
    code = readFileSync(WORKFLOW_BUNDLE_PATH, 'utf8');
  } catch {
    throw new Error(`the workflow bundle ${WORKFLOW_BUNDLE_PATH} is missing: run npm run build`);
  }
  for (const module of bundledModules(code)) {
    const file = join(PROJECT_ROOT, module);
    let compiled: number;
    try {
      compiled = statSync(file).mtimeMs;
    } catch {
      throw new Error(`the workflow bundle ${WORKFLOW_BUNDLE_PATH} was made of ${file}, which is gone: run npm run build`);
    }
    if (compiled > bundled) throw new Error(`the workflow bundle ${WORKFLOW_BUNDLE_PATH} is older than ${file}: run npm run build`);
  }
  return { codePath: WORKFLOW_BUNDLE_PATH };
}

/**
 * The project's own modules in a bundle: webpack names each by its path from the project root
 * (scripts/bundle-workflows.mjs bundles from there), e.g. "./dist/src/harvest/rules.js". The
 * workflows and all they import at run time (src/harvest, the API catalog) are among them.
 */
function bundledModules(code: string): Set<string> {
  return new Set([...code.matchAll(/"\.\/(dist\/[^"]+\.js)"/g)].map((match) => match[1] as string));
}

export interface HarvestWorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue?: string;
  deps: ActivityDeps;
  /**
   * How long a stopping worker lets the activities in flight finish before it cancels them;
   * Temporal's default is none (they are cancelled at once).
   */
  shutdownGraceMs?: number;
  /**
   * Runs the workflows on this process's main thread, not on a worker thread of their own: for a
   * worker that serves its command's one run (`harvester run`, `harvester retry`), whose start is
   * part of that run's time. See WORKFLOWS_ON_MAIN_THREAD.
   */
  workflowsOnMainThread?: boolean;
}

/**
 * Workflows on the main thread: Temporal's `debugMode` (its only switch for it), with the same
 * deadlock limit the SDK gives a workflow thread (5 s an activation), which `debugMode` alone lifts.
 *
 * Why: a workflow thread is a new V8 isolate that loads Temporal's protobuf definitions, gRPC and
 * the native bridge again, after the main thread has loaded them: in `harvester run` that made
 * `Worker.create` 0.55–0.60 s, most of the local worker's start after its imports. On the main
 * thread the run started 0.43–0.55 s sooner and ended 0.2–0.57 s sooner (bench/RESULTS.md,
 * 2026-11-29 12:45Z). The workflows run in the same sandbox (a V8 context of their own) either way.
 * The price, paid by a short-lived worker only: the SDK's promise hook, installed for workflow
 * stack traces, then sees every promise the process makes, the activities' included, and a
 * workflow task waits for the CPU behind the activities' work (the work took 0.08–0.26 s longer).
 * A standing worker (`harvester worker`), which serves many runs for months, keeps its workflows
 * on their own thread.
 */
const WORKFLOWS_ON_MAIN_THREAD = { debugMode: true, isolateExecutionTimeout: '5 seconds' } as const;

export async function createHarvestWorker(options: HarvestWorkerOptions): Promise<Worker> {
  // Temporaries of writes a kill or a full disk interrupted; a live writer's are kept.
  try {
    const removed = removeStrayTemporaries(options.deps.dataDir);
    if (removed.length > 0) options.deps.logger?.info({ removed: removed.length, dataDir: options.deps.dataDir }, 'removed temporaries of interrupted writes');
  } catch (error) {
    options.deps.logger?.warn({ err: error, dataDir: options.deps.dataDir }, 'could not remove temporaries of interrupted writes');
  }
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue ?? HARVEST_TASK_QUEUE,
    workflowBundle: prebuiltWorkflowBundle(),
    activities: createActivities(options.deps),
    // Activities mostly wait on the API: a target's listing, or a job's enrichment with the run's
    // calls in flight inside it. Runs bound their own concurrency (harvest `concurrency`, at most
    // 256 targets), and the API's rate limit paces their calls: this is no cap of its own, room
    // for four runs at the widest, not the 64 that held a run's 256 targets to 64 at once.
    maxConcurrentActivityTaskExecutions: 1_024,
    // A killed worker's cached workflows move to another worker after this, not the default 10 s.
    stickyQueueScheduleToStartTimeout: '3 seconds',
    // Heartbeats (every 2 s) reach Temporal as often, not every 8 s (80 % of the heartbeat
    // timeout): what work in flight has charged and landed shows in `harvester run` as it goes.
    maxHeartbeatThrottleInterval: '2 seconds',
    ...(options.shutdownGraceMs !== undefined ? { shutdownGraceTime: options.shutdownGraceMs } : {}),
    ...(options.workflowsOnMainThread ? WORKFLOWS_ON_MAIN_THREAD : {}),
  });
}
