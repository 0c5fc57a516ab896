import type { CallReport } from '../src/api/client.js';
import type { PageLanding } from '../src/store/landing.js';

/** Where a page sits: the run, the target and its page number, and the call's parameters. */
export interface PagePlace {
  runId: string;
  harvest: string;
  target: string;
  page: number;
  params: Record<string, string>;
  rankOffset?: number;
  nextCursor?: string;
  hasMore?: boolean;
}

/** The landing of one billed answer: what the API sent, what it cost, and where it belongs. */
export function landingOfCall(place: PagePlace, report: CallReport, data: unknown, observedAt: Date = new Date()): PageLanding {
  return {
    format: 1,
    kind: 'page',
    run_id: place.runId,
    harvest: place.harvest,
    target: place.target,
    page: place.page,
    endpoint: report.endpoint,
    params: place.params,
    request_id: report.requestId,
    observed_at: observedAt.toISOString(),
    call: {
      request_id: report.requestId,
      units: Array.isArray(data) ? data.length : 1,
      credits: report.creditsCharged,
      ...(report.cache ? { cache: report.cache } : {}),
    },
    ...(place.rankOffset !== undefined ? { rank_offset: place.rankOffset } : {}),
    ...(place.nextCursor !== undefined ? { next_cursor: place.nextCursor } : {}),
    ...(place.hasMore !== undefined ? { has_more: place.hasMore } : {}),
    data,
  };
}
