/**
 * A run's progress as everyone reads it: the workflow projects its state into this shape, the CLI
 * shows it, activities report live work in it, and failed calls are listed in it. Pure types and
 * one formatting function, so the workflow sandbox can import it.
 */
/** `skipped`: a run that bought nothing because a budget across runs that covers it was spent when it was to start (its reason names the budget). */
export type HarvestStatus = 'running' | 'completed' | 'completed_with_errors' | 'budget_exhausted' | 'paused' | 'failed' | 'skipped';

export interface TargetProgress {
  key: string;
  status: string;
  items: number;
  pages: number;
  credits: number;
  wanted: number;
  /** The checkpoint a resumed listing continues from. */
  cursor?: string;
  error?: { type: string; message: string; requestId?: string };
  /** Something to look at that is no failure: a target whose listing found no item (status `empty`). */
  warning?: string;
  /** A job listed its items, and their enrichment is still to do (or under way). */
  enrichmentPending?: boolean;
}

/**
 * What a piece of work in flight has done that the workflow counts only once it settles: sent in
 * its heartbeats (as `live`), and read by `harvester run` from the pending activities, so the
 * progress shows credits as they are charged and items as they land.
 */
export interface LiveWork {
  /** Credits the API charged the work's calls so far. */
  credits: number;
  /** Items it listed (with their enrichment done), beyond the workflow's count. */
  items: number;
  pages: number;
  /** Items of a job's landed pages it enriched. */
  enriched: number;
  /** What the work is waiting for, when a service it needs does not answer (an outage it waits out). */
  waiting?: string;
}

export interface HarvestProgress {
  runId: string;
  harvest: string;
  status: HarvestStatus;
  startedAt: string;
  budget: number;
  creditsSpent: number;
  creditsReserved: number;
  itemsLanded: number;
  pagesLanded: number;
  targetsDone: number;
  targets: TargetProgress[];
  enrichment: { calls: number; skipped: number; failed: number; pending: number };
  /**
   * Calls begun by a worker that died before their answers were landed: perhaps charged, so their
   * worst case is in creditsSpent, while api_calls has only what was landed.
   */
  callsLost: number;
  /** Tracked items (`track.items`): due when the run started, and observed so far. */
  trackedItems?: { due: number; observed: number };
  /** Answers of the run its final load could not load, set aside in quarantine/: how many, and the first one's reason. */
  answersQuarantined?: AnswersQuarantined;
  /**
   * Repairs of a damaged lake that the run's start or its loads made, line by line (the damaged
   * file and its table, what was loaded again or rebuilt, what was lost with its rows:
   * src/warehouse/lake-repair-report.ts).
   */
  lakeRepairs?: string[];
  reason?: string;
}

/** A run's answers in quarantine/ when its final load ended: bought, landed, and not in the lake. */
export interface AnswersQuarantined {
  count: number;
  /** The first one's reason, as the load gave it. */
  reason: string;
}

/** What a run's status line and `harvester show` say of its answers in quarantine. */
export function quarantinedText(quarantined: AnswersQuarantined): string {
  const answers = `${quarantined.count} answer${quarantined.count === 1 ? '' : 's'}`;
  return `${answers} bought but not loaded, set aside in quarantine/ (${quarantined.count === 1 ? '' : 'the first: '}${quarantined.reason}); \`harvester retry\` loads ${quarantined.count === 1 ? 'it' : 'them'} once the cause is fixed`;
}

/** An enrichment call that failed for good: what it was, why, and the API's request id. A retry makes it again. */
export interface CallFailure {
  /** The target whose items the call enriched. */
  target: string;
  endpoint: string;
  /** The item's URL (or the account) the call was about. */
  subject: string;
  reason: string;
  request_id?: string;
  at: string;
}

/** A failed call and the landing key its answer would have had. */
export interface FailedCall extends CallFailure {
  key: string;
}

/**
 * A run's status in one line, as its Temporal workflow shows it (the workflow's current details,
 * in the UI's "Summary & Details"): the status first, so the five outcomes are told apart at a
 * glance, then what the run has so far, then why it stopped.
 */
export function statusLine(progress: HarvestProgress): string {
  const running = progress.status === 'running' ? `, targets ${progress.targetsDone}/${progress.targets.length}` : '';
  const reason = progress.reason ? `; ${progress.reason}` : '';
  return `${progress.status}: ${progress.itemsLanded} items in ${progress.pagesLanded} pages, ${progress.creditsSpent} of ${progress.budget} credits${running}${reason}`;
}

/** What a finished run keeps in its memo, for listings that should not fetch whole results. */
export interface RunMemo {
  /**
   * When the run started: its first execution's start, which the executions it continued as new
   * do not share. Absent on runs recorded before the workflow kept it.
   */
  startedAt?: string;
  items: number;
  credits: number;
  budget: number;
  pages: number;
}
