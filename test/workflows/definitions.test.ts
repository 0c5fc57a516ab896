/**
 * The workflow's public face agrees with the workflow: the CLI and the schedules start runs by the
 * type `HARVEST_WORKFLOW_TYPE` (a name, so the CLI need not load the workflow's code), which must be
 * the name of the function the worker registers.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { defineQuery, defineSignal } from '@temporalio/workflow';
import { describe, expect, it } from 'vitest';
import { HARVEST_NAME, HARVEST_STATUS, HARVEST_WORKFLOW_TYPE, jobCompletedSignal, progressQuery } from '../../workflows/definitions.js';
import * as workflows from '../../workflows/index.js';

describe('the workflow type', () => {
  it('is the name of the harvest workflow function the worker registers', () => {
    expect(Object.keys(workflows)).toContain(HARVEST_WORKFLOW_TYPE);
    expect((workflows as Record<string, { name: string }>)[HARVEST_WORKFLOW_TYPE]?.name).toBe(HARVEST_WORKFLOW_TYPE);
  });
});

describe('the signal, the query and the search attributes, written without the SDK (kept out of the CLI\'s start)', () => {
  it('are what the SDK\'s defineSignal and defineQuery make of their names', () => {
    expect(jobCompletedSignal).toEqual(defineSignal('jobCompleted'));
    expect(progressQuery).toEqual(defineQuery('progress'));
  });

  it('are what defineSearchAttributeKey makes of their names', () => {
    expect(HARVEST_NAME).toEqual(defineSearchAttributeKey('HarvestName', SearchAttributeType.KEYWORD));
    expect(HARVEST_STATUS).toEqual(defineSearchAttributeKey('HarvestStatus', SearchAttributeType.KEYWORD));
  });
});
