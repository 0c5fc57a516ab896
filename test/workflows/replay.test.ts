import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/project-paths.js';
import { workflowBundle } from '../support/temporal.js';

const HISTORIES = join(PROJECT_ROOT, 'test', 'workflows', 'histories');

describe('recorded histories replay against the current workflow code', () => {
  const files = readdirSync(HISTORIES).filter((file) => file.endsWith('.json'));

  // not-found.json was recorded before a failed harvest failed its workflow (it completed then, and
  // replays so, the patch unseen); not-found-failed-workflow.json is the same run recorded since.
  it('has recorded histories to replay (paging and enrichment, a job, a budget cap, a 404 before and after failed runs failed their workflow)', () => {
    expect(files.sort()).toEqual(['budget-exhausted.json', 'job-by-polling.json', 'not-found-failed-workflow.json', 'not-found.json', 'paged-and-enriched.json']);
  });

  it.each(files)('%s replays without nondeterminism', async (file) => {
    const history = historyFromJSON(JSON.parse(readFileSync(join(HISTORIES, file), 'utf8')));
    // Throws DeterminismViolationError if the code no longer makes the commands this history recorded.
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, `replay-${file}`);
  });
});
