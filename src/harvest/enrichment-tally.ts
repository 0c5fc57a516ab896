/**
 * What enrichment calls came to: counted per page by activities, summed per run by the workflow.
 *
 * The rule for counting them, which a run's summary, `harvester show`, the warehouse's
 * `api_calls` and the report all follow (README, "What the counts mean"):
 * - calls: calls the API answered and the run landed, each one row of `api_calls` (charged or,
 *   from the API's cache, at its price);
 * - skipped: calls the API refused, without charge, for a feature it has switched off (TikTok
 *   downloads: download_unavailable); not calls, and not in `api_calls`;
 * - failed: calls that failed for good (a 404, a refused answer), recorded in the run's
 *   `failed_calls` for `harvester retry` to make again.
 */
export interface EnrichmentTally {
  /** Answered and landed: one row each in `api_calls`. */
  calls: number;
  /** Refused without charge for a switched-off feature: in no table. */
  skipped: number;
  /** Failed for good: in `failed_calls`. */
  failed: number;
  /** Calls not made because the work stopped buying (402, 401): their items are not done. */
  halted?: number;
}

/** Adds `tally`'s calls, skipped and failed into `into` (halted calls are redone, not counted). */
export function addTally(into: Pick<EnrichmentTally, 'calls' | 'skipped' | 'failed'>, tally: EnrichmentTally): void {
  into.calls += tally.calls;
  into.skipped += tally.skipped;
  into.failed += tally.failed;
}
