import cliProgress from 'cli-progress';
import type { WorkflowHandle } from '@temporalio/client';
import { progressQuery, type HarvestProgress } from '../../workflows/definitions.js';
import type { HarvestSummary } from '../../workflows/harvest.js';

/**
 * Live progress of a run, read from its `progress` query once a second: a progress bar (items
 * landed of items wanted, with targets, pages, credits against the budget, and an ETA) on a
 * terminal, plain lines when stderr is not one (logs, CI).
 */
export function watchProgress(handle: WorkflowHandle, stream: NodeJS.WriteStream = process.stderr): { stop(): Promise<void> } {
  const bar = stream.isTTY
    ? new cliProgress.SingleBar(
        {
          stream,
          format: ' {bar} {percentage}% | targets {targets} | items {value}/{total} | pages {pages} | credits {credits}/{budget} | {phase}',
          hideCursor: true,
        },
        cliProgress.Presets.shades_classic,
      )
    : undefined;
  let started = false;
  let lastLine = '';
  const startedAt = Date.now();
  /** Listing: an ETA from the item rate so far. Enrichment (the bar is full by then): what is left. */
  const phase = (progress: HarvestProgress, wanted: number): string => {
    if (progress.itemsLanded < wanted) {
      const perMs = progress.itemsLanded / Math.max(1, Date.now() - startedAt);
      return perMs > 0 ? `ETA ${Math.ceil((wanted - progress.itemsLanded) / perMs / 1000)}s` : 'ETA …';
    }
    return progress.enrichment.pending > 0 ? `enriching, ${progress.enrichment.pending} items left` : 'finishing';
  };
  let inFlight: Promise<void> = Promise.resolve();
  const show = (progress: HarvestProgress) => {
    const wanted = progress.targets.reduce((sum, target) => sum + target.wanted, 0);
    const payload = { targets: `${progress.targetsDone}/${progress.targets.length}`, pages: progress.pagesLanded, credits: progress.creditsSpent, budget: progress.budget, phase: phase(progress, wanted) };
    if (bar) {
      if (!started) bar.start(wanted, progress.itemsLanded, payload);
      else bar.update(progress.itemsLanded, payload);
      started = true;
      return;
    }
    const line = `${progress.status}: targets ${payload.targets}, items ${progress.itemsLanded}/${wanted}, pages ${payload.pages}, credits ${payload.credits}/${payload.budget}, ${payload.phase}`;
    if (line !== lastLine) stream.write(`${line}\n`);
    lastLine = line;
  };
  const timer = setInterval(() => {
    inFlight = handle
      .query(progressQuery)
      .then(show)
      .catch(() => undefined); // between executions (continue-as-new) or at the end: try again next tick
  }, 1_000);
  return {
    async stop() {
      clearInterval(timer);
      // A query still in flight must finish before the caller closes the connection.
      await inFlight;
      bar?.stop();
    },
  };
}

/** Waits for a run's result, showing its progress meanwhile. */
export async function resultWithProgress(handle: WorkflowHandle): Promise<HarvestSummary> {
  const progress = watchProgress(handle);
  try {
    return (await handle.result()) as HarvestSummary;
  } finally {
    await progress.stop();
  }
}

/** A summary as commands print it with --json: without the checkpoint, which is for `retry`. */
export function printableSummary(summary: HarvestSummary): Omit<HarvestSummary, 'checkpoint'> {
  const { checkpoint: _checkpoint, ...shown } = summary;
  return shown;
}
