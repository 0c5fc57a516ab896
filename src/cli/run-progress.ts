import { setTimeout as sleep } from 'node:timers/promises';
import cliProgress from 'cli-progress';
import { isGrpcServiceError, type WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import type { HarvestProgress, LiveWork } from '../harvest/progress.js';
import { progressQuery } from '../../workflows/definitions.js';
import type { harvestWorkflow, HarvestSummary } from '../../workflows/harvest.js';
import { harvestSummary } from '../temporal/run-summary.js';
import { DEFAULT_OUTAGE_WAIT_MS } from '../store/outage.js';
import { DEFAULT_FOLLOW_RETRY_MS } from './follow-retry.js';

/**
 * A run's progress as it stands: the workflow's `progress` query, which counts a piece of work's
 * credits and items only once the work settles, plus what the work in flight reported in its
 * heartbeats (LiveWork), read from the run's pending activities. Work is measured in units:
 * items to list (each counted once listed and enriched) and the items of jobs to enrich.
 */
export interface LiveProgress {
  progress: HarvestProgress;
  /** Credits charged so far: settled work's, and what the API charged the work in flight. */
  credits: number;
  items: number;
  pages: number;
  /** Units of work left to do. */
  remaining: number;
  /** Units of work in all (as far as known: a listing that ends short takes its rest away). */
  total: number;
}

/** The `live` part of each pending activity's last heartbeat. */
function liveWorkOf(pending: readonly { heartbeatDetails?: { payloads?: Payload[] | null } | null }[]): LiveWork[] {
  const live: LiveWork[] = [];
  for (const activity of pending) {
    const payload = activity.heartbeatDetails?.payloads?.[0];
    if (!payload) continue;
    try {
      const details = defaultPayloadConverter.fromPayload<{ live?: LiveWork }>(payload);
      if (details?.live) live.push(details.live);
    } catch {
      // Details of another shape (an older worker's): nothing live to add.
    }
  }
  return live;
}

export function liveProgressOf(progress: HarvestProgress, live: readonly LiveWork[]): LiveProgress {
  const sum = (pick: (work: LiveWork) => number) => live.reduce((total, work) => total + pick(work), 0);
  let total = 0;
  let done = 0;
  for (const target of progress.targets) {
    // A target still listing wants its max items; one that finished wants what it found.
    total += target.status === 'pending' ? Math.max(target.wanted, target.items) : target.items;
    done += target.items;
    // A job's items to enrich are work too, done as the enrichment reports them.
    if (target.enrichmentPending) total += target.items;
  }
  done += sum((work) => work.items) + sum((work) => work.enriched);
  return {
    progress,
    credits: progress.creditsSpent + sum((work) => work.credits),
    items: progress.itemsLanded + sum((work) => work.items),
    pages: progress.pagesLanded + sum((work) => work.pages),
    remaining: Math.max(0, total - done),
    total,
  };
}

/**
 * Reads a run's live progress: its query, then its pending activities' heartbeats. In that order:
 * a work that completes between the two is missed for a moment (the display keeps its highest
 * figures), never counted twice.
 */
export async function readLiveProgress(handle: WorkflowHandle): Promise<LiveProgress> {
  const progress = await handle.query(progressQuery);
  const description = await handle.describe();
  return liveProgressOf(progress, liveWorkOf(description.raw.pendingActivities ?? []));
}

/**
 * An ETA that does not jump: the rate at which the work left shrinks, measured over a window (so
 * bursts of progress, such as heartbeats a few seconds apart, average out), shown only once the
 * window holds a few seconds of progress, and then moved toward each new estimate by a fraction,
 * at most a tenth (or two seconds) at a time, while it counts down between estimates.
 */
export class EtaEstimator {
  private samples: { at: number; remaining: number }[] = [];
  private shown: { at: number; seconds: number } | undefined;

  constructor(
    private readonly windowMs = 30_000,
    /** No ETA before the samples span this long with progress in them. */
    private readonly basisMs = 5_000,
    /** How far each update moves the ETA toward the new estimate. */
    private readonly weight = 0.2,
  ) {}

  /** The ETA in seconds at time `at` (ms), with `remaining` units left; undefined while there is no basis. */
  update(at: number, remaining: number): number | undefined {
    if (remaining <= 0) {
      this.shown = undefined;
      return 0;
    }
    this.samples.push({ at, remaining });
    while (this.samples.length > 2 && this.samples[1]!.at <= at - this.windowMs) this.samples.shift();
    const first = this.samples[0]!;
    const span = at - first.at;
    const progress = first.remaining - remaining;
    const countedDown = this.shown ? Math.max(0, this.shown.seconds - (at - this.shown.at) / 1000) : undefined;
    if (span < this.basisMs || progress <= 0) {
      // No new basis (no progress in the window): the last ETA counts down, until it runs out.
      if (countedDown === undefined || countedDown <= 0) return undefined;
      this.shown = { at, seconds: countedDown };
      return countedDown;
    }
    const estimate = remaining / (progress / span) / 1000;
    if (countedDown === undefined) {
      this.shown = { at, seconds: estimate };
      return estimate;
    }
    const step = this.weight * (estimate - countedDown);
    const bound = Math.max(2, countedDown * 0.1);
    const seconds = Math.max(0, countedDown + Math.max(-bound, Math.min(bound, step)));
    this.shown = { at, seconds };
    return seconds;
  }
}

function formatEta(seconds: number): string {
  const whole = Math.max(1, Math.round(seconds));
  if (whole < 60) return `${whole}s`;
  const minutes = Math.floor(whole / 60);
  return minutes < 60 ? `${minutes}m${String(whole % 60).padStart(2, '0')}s` : `${Math.floor(minutes / 60)}h${String(minutes % 60).padStart(2, '0')}m`;
}

/**
 * Live progress of a run, read once a second: a progress bar (work done of work wanted, with
 * targets, items, pages, credits charged against the budget, and an ETA) on a terminal, plain
 * lines when stderr is not one (logs, CI). Credits include what the work in flight was charged;
 * items count once listed and enriched.
 */
export function watchProgress(handle: WorkflowHandle, stream: NodeJS.WritableStream & { isTTY?: boolean } = process.stderr): { stop(): Promise<void> } {
  const bar = stream.isTTY
    ? new cliProgress.SingleBar(
        {
          stream: stream as NodeJS.WriteStream,
          format: ' {bar} {percentage}% | targets {targets} | items {items} | pages {pages} | credits {credits}/{budget} | {phase}',
          hideCursor: true,
        },
        cliProgress.Presets.shades_classic,
      )
    : undefined;
  let started = false;
  let lastLine = '';
  const eta = new EtaEstimator();
  const phase = (live: LiveProgress): string => {
    if (live.remaining === 0) return 'finishing';
    const seconds = eta.update(Date.now(), live.remaining);
    const pending = live.progress.enrichment.pending;
    const what = pending > 0 && live.progress.targets.every((target) => target.status !== 'pending') ? `enriching the items of ${pending} job${pending === 1 ? '' : 's'}, ` : '';
    return `${what}${seconds === undefined || seconds <= 0 ? 'ETA …' : `ETA ${formatEta(seconds)}`}`;
  };
  let inFlight: Promise<void> = Promise.resolve();
  let reading = false;
  // Credits charged and items landed only grow: a reading that missed a work settling meanwhile
  // does not take them back.
  let most = { credits: 0, items: 0, pages: 0 };
  const show = (reading: LiveProgress) => {
    most = { credits: Math.max(most.credits, reading.credits), items: Math.max(most.items, reading.items), pages: Math.max(most.pages, reading.pages) };
    const live = { ...reading, ...most };
    const { progress } = live;
    const wanted = progress.targets.reduce((sum, target) => sum + (target.status === 'pending' ? target.wanted : target.items), 0);
    const payload = { targets: `${progress.targetsDone}/${progress.targets.length}`, items: `${live.items}/${wanted}`, pages: live.pages, credits: live.credits, budget: progress.budget, phase: phase(live) };
    if (bar) {
      if (!started) bar.start(Math.max(1, live.total), live.total - live.remaining, payload);
      else {
        bar.setTotal(Math.max(1, live.total));
        bar.update(live.total - live.remaining, payload);
      }
      started = true;
      return;
    }
    const line = `${progress.status}: targets ${payload.targets}, items ${payload.items}, pages ${payload.pages}, credits ${payload.credits}/${payload.budget}, ${payload.phase}`;
    if (line !== lastLine) stream.write(`${line}\n`);
    lastLine = line;
  };
  const timer = setInterval(() => {
    // One reading at a time: while Temporal does not answer, a reading retries for a while (the
    // client's own retries), and one left behind would retry on a connection closed meanwhile.
    if (reading) return;
    reading = true;
    inFlight = readLiveProgress(handle)
      .then(show)
      .catch(() => undefined) // between executions (continue-as-new) or at the end: try again next tick
      .finally(() => (reading = false));
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

/** gRPC's codes for a server that is not there (UNAVAILABLE), or did not answer in time (DEADLINE_EXCEEDED). */
const SERVER_GONE_CODES = new Set([14, 4]);

/** Whether `error` says Temporal did not answer (restarting, or down), as opposed to an answer. */
export function isTemporalUnavailable(error: unknown): boolean {
  for (let at: unknown = error, depth = 0; at && depth < 6; at = (at as { cause?: unknown }).cause, depth++) {
    if (isGrpcServiceError(at) && SERVER_GONE_CODES.has(at.code)) return true;
  }
  return false;
}

/** Temporal did not come back within the follow bound: the run goes on without this command. */
export class RunNotFollowedError extends Error {
  override readonly name = 'RunNotFollowedError';
  constructor(
    readonly runId: string,
    waitedMs: number,
    cause: unknown,
  ) {
    super(`Temporal did not answer for ${Math.round(waitedMs / 1_000)} s (${(cause as Error).message})`, { cause });
  }
}


/**
 * Waits for a run's summary (a failed harvest's too, from its failure), showing its progress
 * meanwhile. Temporal restarting under it is no end of the run: it says so once, asks again every
 * `retryMs`, for up to `followMs` of Temporal not answering (then RunNotFollowedError), and once
 * Temporal answers, says after how many unanswered asks.
 */
export async function resultWithProgress(
  handle: WorkflowHandle<typeof harvestWorkflow>,
  stream: NodeJS.WritableStream & { isTTY?: boolean } = process.stderr,
  followMs = DEFAULT_OUTAGE_WAIT_MS,
  retryMs = DEFAULT_FOLLOW_RETRY_MS,
): Promise<HarvestSummary> {
  const progress = watchProgress(handle, stream);
  try {
    let outage: { since: number; unanswered: number } | undefined;
    for (;;) {
      const asked = Date.now();
      try {
        const summary = await harvestSummary(handle);
        if (outage) stream.write(`harvester: Temporal answered again, after ${outage.unanswered} asks it did not answer over ${Math.round((asked - outage.since) / 1_000)} s\n`);
        return summary;
      } catch (error) {
        if (!isTemporalUnavailable(error)) throw error;
        // A wait that ran a while before failing is a new outage, not the same one going on.
        if (outage !== undefined && Date.now() - asked > 30_000) outage = undefined;
        if (outage === undefined) {
          outage = { since: Date.now(), unanswered: 0 };
          stream.write(`harvester: Temporal does not answer (${(error as Error).message}); run ${handle.workflowId} goes on, and this command waits for Temporal to come back (up to ${Math.round(followMs / 1_000)} s)\n`);
        }
        outage.unanswered += 1;
        if (Date.now() - outage.since >= followMs) throw new RunNotFollowedError(handle.workflowId, Date.now() - outage.since, error);
        await sleep(retryMs);
      }
    }
  } finally {
    await progress.stop();
  }
}

/** A summary as commands print it with --json: without the checkpoint, which is for `retry`. */
export function printableSummary(summary: HarvestSummary): Omit<HarvestSummary, 'checkpoint'> {
  const { checkpoint: _checkpoint, ...shown } = summary;
  return shown;
}
