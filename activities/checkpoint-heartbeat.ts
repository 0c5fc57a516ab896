/**
 * A long activity's checkpoint, kept in its heartbeats: a retried attempt resumes from the
 * progress its last attempt heartbeated, or from `start` on a first attempt. The work marks a point
 * reached (landed, its items enriched) with `commit`; only durable points are heartbeated, with what
 * the work has done so far (`live`, for `harvester run`), so a killed worker's work moves on within
 * the heartbeat timeout and resumes where it had durably reached.
 *
 * Durability is a group commit: a committed point becomes durable when `makeDurable` (the journal's
 * sync, which makes the run's answers durable first) has run after it, at most once a second while
 * points come, at each heartbeat, and at `flush`, which the work awaits before it returns. A sync per
 * page cost a listing two fsyncs a page (the answers' segment and the journal), most of a fast
 * listing's time; a point not yet durable is only read back from the store by a retry, never bought
 * again, since its answers and records are in the kernel's hands (a killed process loses none of
 * them) and its position is not heartbeated until they are on the disk.
 */
import { Context } from '@temporalio/activity';
import type { LiveWork } from '../src/harvest/progress.js';
import { waitingFor } from './outages.js';

/** Heartbeats go out at least this often while a page or its enrichment is in flight. */
const HEARTBEAT_EVERY_MS = 2_000;
/** Points are made durable at most this often while they come (and at each heartbeat and flush). */
const DURABLE_EVERY_MS = 1_000;

export class CheckpointHeartbeat<P extends object> {
  /** Where this attempt starts: its last attempt's durable progress, or `start`. */
  readonly resumed: P;
  private durable: P;
  /** The latest point committed and not yet durable. */
  private pending: P | undefined;
  private syncing: Promise<void> = Promise.resolve();
  /** A sync is queued and has not started: it will take the latest pending point, so none is queued behind it. */
  private syncQueued = false;
  private lastSync = 0;
  /** A sync that failed: the work stops at its next commit or flush with it. */
  private failure: unknown;
  /**
   * The latest attempt that made a point durable: this one once it has, else an earlier one's, as
   * its heartbeats said (0: none yet). A failure's retries are counted from it (activities/outages.ts).
   */
  private progressAttempt: number;
  private readonly context = Context.current();
  private readonly timer: NodeJS.Timeout;

  /**
   * `makeDurable` makes what the work landed and journaled so far outlive a machine crash (the work
   * frame's journal sync, activities/work-frame.ts): every work lands or journals something, so no
   * point is heartbeated before it has run.
   */
  constructor(
    start: () => P,
    private readonly live: (durable: P) => LiveWork,
    private readonly makeDurable: () => Promise<void>,
  ) {
    const heartbeated = this.context.info.heartbeatDetails as (P & { progressAttempt?: number }) | undefined;
    this.resumed = heartbeated ?? start();
    this.progressAttempt = heartbeated?.progressAttempt ?? 0;
    this.durable = structuredClone(this.resumed);
    // Every tick beats, whatever a sync is doing: the beat carries the last durable point, and a
    // sync that waits out an outage (a store that does not answer) must not silence the work, or
    // Temporal times its attempt out and retries work that was only waiting. (Ticks used to sync
    // instead of beating while a point was pending, and a point committed behind a hung sync
    // stayed pending: no beat for the whole outage.)
    this.timer = setInterval(() => {
      if (this.pending) this.syncInBackground();
      this.beat();
    }, HEARTBEAT_EVERY_MS);
  }

  /** A point a retry may resume from once it is durable. Throws if an earlier point's sync failed. */
  commit(point: P): void {
    if (this.failure !== undefined) throw this.failure;
    this.pending = structuredClone(point);
    if (Date.now() - this.lastSync >= DURABLE_EVERY_MS) this.syncInBackground();
  }

  /**
   * Makes what the work landed and journaled so far durable (even when no point is pending) and
   * heartbeats the latest committed point; throws if a sync failed.
   */
  async flush(): Promise<void> {
    this.syncInBackground(true);
    await this.syncing;
    if (this.failure !== undefined) throw this.failure;
  }

  /** The latest durable point. */
  get last(): P {
    return this.durable;
  }

  /** The latest attempt of the work that made a point durable, this one included; 0 when none has. */
  get attemptOfLastProgress(): number {
    return this.progressAttempt;
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /**
   * Queues a sync of the latest pending point behind any under way: one at a time, in order. One
   * already queued and not started takes the latest point when it starts, so a tick or a commit
   * queues none behind it (while a sync hangs in an outage, they would pile up); a flush (`always`)
   * queues its own, which syncs even with no point pending.
   */
  private syncInBackground(always = false): void {
    if (this.syncQueued && !always) return;
    this.syncQueued = true;
    this.syncing = this.syncing.then(async () => {
      this.syncQueued = false;
      const point = this.pending;
      if ((point === undefined && !always) || this.failure !== undefined) return;
      this.pending = undefined;
      this.lastSync = Date.now();
      try {
        await this.makeDurable();
      } catch (error) {
        this.failure = error;
        return;
      }
      if (point === undefined) return;
      this.durable = point;
      this.progressAttempt = this.context.info.attempt;
      this.beat();
    });
  }

  private beat(): void {
    const waiting = waitingFor();
    this.context.heartbeat({ ...this.durable, progressAttempt: this.progressAttempt, live: { ...this.live(this.durable), ...(waiting ? { waiting } : {}) } });
  }
}
