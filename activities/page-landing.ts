/**
 * A page's landing: the one builder of a page's PageLanding (pageLanding), whether its answer came
 * from a billed call (landingOfCall, landAt) or from a job's results (activities/jobs.ts), so every
 * page the lake loads has its fields made in one place.
 */
import type { CallReport, PageResult } from '../src/api/client.js';
import type { EndpointKey } from '../src/api-catalog/endpoints.js';
import type { LandedCall, PageLanding } from '../src/store/landing.js';
import type { Store } from '../src/store/store.js';

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

/** The answer a page came in: its endpoint and request, when it was observed, and the billed call it carries, if any. */
export interface PageAnswer {
  endpoint: EndpointKey;
  requestId: string;
  /** The API's clock, not this worker's: observations' ages are measured on it. */
  observedAt: string;
  /** The billed call this page records (a job's charge lands once, with its first results page). */
  call?: LandedCall;
}

/** The landing of a page: `data` as the API sent it, at `place`, from `answer`. */
export function pageLanding(place: PagePlace, answer: PageAnswer, data: unknown): PageLanding {
  return {
    format: 1,
    kind: 'page',
    run_id: place.runId,
    harvest: place.harvest,
    target: place.target,
    page: place.page,
    endpoint: answer.endpoint,
    params: place.params,
    request_id: answer.requestId,
    observed_at: answer.observedAt,
    ...(answer.call ? { call: answer.call } : {}),
    ...(place.rankOffset !== undefined ? { rank_offset: place.rankOffset } : {}),
    ...(place.nextCursor !== undefined ? { next_cursor: place.nextCursor } : {}),
    ...(place.hasMore !== undefined ? { has_more: place.hasMore } : {}),
    data,
  };
}

/**
 * The `land` of a list page's call: the page lands as the API sent it, at `place`, with where its
 * list goes on. The answer goes from the call to the store here, in one step, awaited before the
 * charge settles.
 */
export function landAt(store: Store, place: PagePlace): (answer: PageResult<unknown>) => Promise<string> {
  return (answer) => store.writeLanding(landingOfCall({ ...place, nextCursor: answer.nextCursor, hasMore: answer.hasMore }, answer, answer.items), { untilSync: true });
}

/** The landing of one billed answer: what the API sent, what it cost, and where it belongs. */
export function landingOfCall(place: PagePlace, report: CallReport, data: unknown): PageLanding {
  const call: LandedCall = {
    request_id: report.requestId,
    units: Array.isArray(data) ? data.length : 1,
    credits: report.creditsCharged,
    ...(report.cache ? { cache: report.cache } : {}),
  };
  return pageLanding(place, { endpoint: report.endpoint, requestId: report.requestId, observedAt: report.answeredAt.toISOString(), call }, data);
}
