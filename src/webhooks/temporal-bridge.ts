/**
 * What webhook events do to Temporal: `job.completed` signals the run that waits on that job,
 * `credits.low` pauses every harvest schedule and stops new runs, and `plan.changed` (credits are
 * back, prices may differ) lifts that: schedules paused for low credits resume, and the next run
 * reads the price table afresh.
 */
import { ScheduleNotFoundError, type Client, type ScheduleHandle } from '@temporalio/client';
import type { Logger } from '../logger.js';
import type { WebhookPayload } from '../api-catalog/resources.js';
import { harvestScheduleIds } from '../temporal/schedules.js';
import { jobCompletedSignal } from '../../workflows/definitions.js';
import type { Store } from '../store/store.js';

export const CREDITS_LOW_NOTE = 'paused: credits.low';

export function temporalWebhookHandler(client: Client, store: Store, logger?: Logger) {
  return async (event: WebhookPayload): Promise<void> => {
    if (event.type === 'job.completed') {
      const jobId = String(event.data.job_id);
      const job = await store.findJob(jobId);
      if (!job) {
        logger?.info({ jobId }, 'job.completed for a job no run here started');
        return;
      }
      await client.workflow.getHandle(job.workflowId).signal(jobCompletedSignal, { jobId });
      return;
    }
    if (event.type === 'credits.low') {
      await store.markCreditsLow({ remaining_credits: Number(event.data.remaining_credits), plan: String(event.data.plan ?? '') });
      await forEachSchedule(client, async (handle) => {
        if (!(await handle.describe()).state.paused) await handle.pause(CREDITS_LOW_NOTE);
      });
      return;
    }
    await store.clearCreditsLow();
    await forEachSchedule(client, async (handle) => {
      const described = await handle.describe();
      if (described.state.paused && described.state.note === CREDITS_LOW_NOTE) await handle.unpause('resumed: plan.changed');
    });
  };
}

/** Acts on every harvest schedule; one deleted meanwhile is skipped, not allowed to stop the rest. */
async function forEachSchedule(client: Client, act: (handle: ScheduleHandle) => Promise<void>): Promise<void> {
  for (const id of await harvestScheduleIds(client)) {
    try {
      await act(client.schedule.getHandle(id));
    } catch (error) {
      if (!(error instanceof ScheduleNotFoundError)) throw error;
    }
  }
}
