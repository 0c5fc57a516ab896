/**
 * `/v1/jobs`: a list call over the synchronous page size starts a job; a key reads its own jobs
 * and, once completed, their results, page by page with signed cursors, for 24 hours.
 */
import { PAGE_LIMITS, endpointKey, type EndpointSpec } from '../api-catalog/endpoints.js';
import { ApiError } from './api-error.js';
import type { CallContext } from './billing.js';
import type { EmulatedClock } from './clock.js';
import type { ContentProducer, ListPosition, Target } from './content.js';
import type { CursorsAndMedia } from './cursors-and-media.js';
import type { Reply } from './http-io.js';
import type { JobRunner, StoredJob } from './jobs.js';
import { parseLimit } from './request-parsers.js';

const JOB_RESULTS_CURSOR_SCOPE = 'jobs/results';

export class JobEndpoints {
  constructor(
    private readonly jobs: JobRunner,
    private readonly content: ContentProducer,
    private readonly clock: EmulatedClock,
    private readonly cursors: CursorsAndMedia,
  ) {}

  create(spec: EndpointSpec, target: Target, query: URLSearchParams, position: ListPosition | undefined, limit: number, context: CallContext): Reply {
    const pull = () => {
      const items: Record<string, unknown>[] = [];
      let at = position;
      while (items.length < limit) {
        const page = this.content.list(spec, target, at, Math.min(PAGE_LIMITS.jobResultsMax, limit - items.length), this.clock.now());
        items.push(...page.items);
        if (!page.hasMore || page.next === undefined) break;
        at = page.next;
      }
      return items;
    };
    const params = Object.fromEntries(query.entries());
    const job = this.jobs.create(context.account.apiKey, context.requestId, endpointKey(spec), params, spec.item, pull);
    return { status: 202, json: { data: job.record, request_id: context.requestId } };
  }

  own(jobId: string, context: CallContext): StoredJob {
    const job = this.jobs.get(context.account.apiKey, jobId);
    if (!job) throw new ApiError(404, 'job_not_found', `no job ${jobId}`);
    return job;
  }

  results(jobId: string, url: URL, context: CallContext): Reply {
    const job = this.own(jobId, context);
    if (job.record.status === 'failed') throw new ApiError(409, 'job_failed', `job ${jobId} failed: ${job.record.error?.message ?? ''}`);
    if (job.record.status !== 'completed') throw new ApiError(409, 'job_not_ready', `job ${jobId} is ${job.record.status}; wait for job.completed or poll the job`);
    const now = this.clock.now();
    if (now >= job.resultsExpireAtMs) throw new ApiError(410, 'results_expired', `the results of job ${jobId} were kept 24 hours and are gone`);
    const limit = parseLimit(url.searchParams.get('limit'), PAGE_LIMITS.jobResultsDefault, PAGE_LIMITS.jobResultsMax);
    const cursorText = url.searchParams.get('cursor');
    const offset = cursorText ? (this.cursors.readCursor(cursorText, JOB_RESULTS_CURSOR_SCOPE, jobId, now) as number) : 0;
    const items = job.results.slice(offset, offset + limit);
    const hasMore = offset + items.length < job.results.length;
    const cursor = hasMore ? this.cursors.writeCursor(JOB_RESULTS_CURSOR_SCOPE, jobId, offset + items.length, job.resultsExpireAtMs) : undefined;
    const meta = { count: items.length, limit, ...(job.item ? { item: job.item } : {}), ...(cursor ? { cursor } : {}), has_more: hasMore };
    return { status: 200, json: { data: items, meta, request_id: context.requestId } };
  }
}
