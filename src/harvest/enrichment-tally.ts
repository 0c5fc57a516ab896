/** What enrichment calls came to: counted per page by activities, summed per run by the workflow. */
export interface EnrichmentTally {
  calls: number;
  skipped: number;
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
