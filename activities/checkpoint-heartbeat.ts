/**
 * A long activity's checkpoint, kept in its heartbeats: a retried attempt resumes from the
 * progress its last attempt heartbeated, or from `start` on a first attempt. The work marks a
 * point durable (landed, its items enriched, its journal synced) with `commit`; only durable
 * points are heartbeated, with what the work has done so far (`live`, for `harvester run`), after
 * each commit and every 2 s meanwhile, so a killed worker's work moves on within the heartbeat
 * timeout and resumes where it had durably reached.
 */
import { Context } from '@temporalio/activity';
import type { LiveWork } from '../src/harvest/progress.js';
import { waitingFor } from './outages.js';

/** Heartbeats go out at least this often while a page or its enrichment is in flight. */
const HEARTBEAT_EVERY_MS = 2_000;

export class CheckpointHeartbeat<P extends object> {
  /** Where this attempt starts: its last attempt's durable progress, or `start`. */
  readonly resumed: P;
  private durable: P;
  private readonly context = Context.current();
  private readonly timer: NodeJS.Timeout;

  constructor(start: () => P, private readonly live: (durable: P) => LiveWork) {
    const heartbeated = this.context.info.heartbeatDetails as P | undefined;
    this.resumed = heartbeated ?? start();
    this.durable = structuredClone(this.resumed);
    this.timer = setInterval(() => this.beat(), HEARTBEAT_EVERY_MS);
  }

  /** The point a retry resumes from, heartbeated at once. */
  commit(durable: P): void {
    this.durable = structuredClone(durable);
    this.beat();
  }

  /** The latest durable point. */
  get last(): P {
    return this.durable;
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private beat(): void {
    const waiting = waitingFor();
    this.context.heartbeat({ ...this.durable, live: { ...this.live(this.durable), ...(waiting ? { waiting } : {}) } });
  }
}
