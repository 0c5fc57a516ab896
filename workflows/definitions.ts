/**
 * The harvest workflow's public face: its signals, queries, search attributes and task queue,
 * shared by the workflow, the webhook receiver (which signals) and the CLI (which queries).
 */
import type { defineSearchAttributeKey, QueryDefinition, SearchAttributeType, SignalDefinition } from '@temporalio/common';
import type { HarvestProgress } from '../src/harvest/progress.js';

// The signal, the query and the search attributes are written as `defineSignal`, `defineQuery` and
// `defineSearchAttributeKey` make them (a type and a name; their type brands exist only at compile
// time) rather than by calling them: those live in `@temporalio/workflow` and `@temporalio/common`,
// whose imports (about 20 and 50-80 ms) would be in the CLI's start (`harvester run`, `show`),
// which imports this file for these names before anything else of Temporal's.

/** Sent by the webhook receiver when `job.completed` arrives for a job this run waits on. */
export const jobCompletedSignal = { type: 'signal', name: 'jobCompleted' } as SignalDefinition<[{ jobId: string }], 'jobCompleted'>;

export const progressQuery = { type: 'query', name: 'progress' } as QueryDefinition<HarvestProgress, [], 'progress'>;

export const HARVEST_TASK_QUEUE = 'harvester';

/**
 * The harvest workflow's type: the name of its function (harvest.ts's `harvestWorkflow`). Starting
 * a run by it rather than by the function keeps the workflow's code, and all it imports, out of the
 * CLI's start (the `run` command's import went from about 218 to 210 ms: most of what the workflow
 * imports, the client loads too); test/workflows/definitions.test.ts holds the two equal.
 */
export const HARVEST_WORKFLOW_TYPE = 'harvestWorkflow';

/** What `defineSearchAttributeKey(name, SearchAttributeType.KEYWORD)` returns. */
type KeywordAttributeKey = ReturnType<typeof defineSearchAttributeKey<typeof SearchAttributeType.KEYWORD>>;

/**
 * Search attributes every run sets, so `harvester runs` can filter by harvest and outcome. The
 * embedded dev server registers them; on another cluster, create them once (docs in README).
 */
export const HARVEST_NAME = { name: 'HarvestName', type: 'KEYWORD' } as KeywordAttributeKey;
export const HARVEST_STATUS = { name: 'HarvestStatus', type: 'KEYWORD' } as KeywordAttributeKey;

/**
 * The type of the failure a harvest that ended `failed` fails its workflow execution with; the
 * failure's first detail is the run's HarvestSummary. Also the name of the patch that began it.
 */
export const HARVEST_FAILED = 'HarvestFailed';
