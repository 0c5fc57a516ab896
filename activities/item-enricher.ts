/**
 * Enrichment of listed items: their object calls (stats, transcript, summary, download) and their
 * comments, many in flight at once, each journaled before it is sent and landed before it is
 * settled. A call this work already settled (an earlier attempt) is not made again; a call another
 * target of the run already landed is a duplicate, neither bought nor counted again.
 */
import type { ObjectEndpoint } from '../src/api/client.js';
import { AuthenticationError, BudgetSpentError, FeatureUnavailableError, InsufficientCreditsError, MediaExpiredError, SocialApiError } from '../src/api/errors.js';
import { findEndpoint, PAGE_LIMITS, type Platform } from '../src/api-catalog/endpoints.js';
import { commentsLandingKey, itemLandingKey, pageLandingKey } from '../src/store/layout.js';
import { commentsTargetKey, itemTargetKey } from '../src/harvest/targets.js';
import type { CallFailure, FailedCall } from '../src/harvest/progress.js';
import type { EnrichmentTally } from '../src/harvest/enrichment-tally.js';
import { commentsPerItem, isPhotoPostUrl, itemEnrichmentWorst, objectEnrichments, priceOf } from '../src/harvest/rules.js';
import { meteredCall } from './metered-call.js';
import { landAt, landingOfCall } from './page-landing.js';
import type { EnricherParts } from './work-frame.js';
import type { WorkStop } from '../src/harvest/failures.js';
import { FileWriteError } from '../src/store/durable-file.js';
import type { StoredMedia } from '../src/store/media-store.js';

/** What the harvester reads of a download's answer: the link to its media file. */
interface DownloadAnswer {
  media_url?: string;
}

export interface ItemEnricherDeps extends EnricherParts {
  /** The target whose items these are: failed calls are recorded against it. */
  target: string;
}

/** Comments pages hold at most this many (the API's synchronous maximum). */
const COMMENTS_PAGE = PAGE_LIMITS.maxSynchronous;

/**
 * A work's enrichers, one per target (so a call that fails is recorded against its own target),
 * each made when first asked for.
 */
export class TargetEnrichers {
  private readonly made = new Map<string, ItemEnricher>();

  constructor(private readonly parts: EnricherParts) {}

  of(target: string): ItemEnricher {
    let enricher = this.made.get(target);
    if (!enricher) {
      enricher = new ItemEnricher({ ...this.parts, target });
      this.made.set(target, enricher);
    }
    return enricher;
  }

  /** The first stop an enricher met (a 402, a refused key), if any. */
  stop(): WorkStop | undefined {
    return [...this.made.values()].find((enricher) => enricher.stop)?.stop;
  }
}

export class ItemEnricher {
  stop: WorkStop | undefined;

  constructor(private readonly deps: ItemEnricherDeps) {}

  /**
   * The worst case of what enriching the item at this URL still needs: all of it, less the calls
   * this work already settled (an earlier attempt's, which its journal already counts). Hold it in
   * the budget before the item's calls start.
   */
  worstOf(platform: Platform, url: string): number {
    const { prices, enrich, runId, journal } = this.deps;
    let worst = itemEnrichmentWorst(prices, platform, enrich, isPhotoPostUrl(url));
    for (const endpoint of objectEnrichments(enrich, isPhotoPostUrl(url))) {
      if (journal.isSettled(itemLandingKey(runId, platform, endpoint, url))) worst -= priceOf(prices, platform, endpoint);
    }
    // A comments list of one page that is settled needs nothing more; a longer one, the rest of it at worst.
    const comments = commentsPerItem(enrich);
    if (comments > 0 && comments <= COMMENTS_PAGE && journal.isSettled(commentsLandingKey(runId, platform, url, 1))) worst -= comments * priceOf(prices, platform, 'comments');
    return worst;
  }

  /**
   * Enriches items whose worst cases the caller holds in the budget (worstOf each), releases what
   * their calls did not take, and counts their calls in `tally`.
   */
  async enrich(platform: Platform, urls: readonly string[], tally: EnrichmentTally): Promise<void> {
    await settleAll(urls.map((url) => this.enrichItem(platform, url, tally)));
  }

  /**
   * Makes again a call of the run that failed for good (as its journals record it), if the budget
   * has room for its worst case. Comments are listed again from their first page: the pages landed
   * before the failure are read back, not bought again. False when the budget had no room for it,
   * so it was not made: it stays failed, and the run says so.
   */
  async redo(failure: FailedCall, tally: EnrichmentTally): Promise<boolean> {
    const { budget, prices, enrich } = this.deps;
    const [platform, endpoint] = failure.endpoint.split('/') as [Platform, string];
    const comments = endpoint === 'comments';
    const worst = comments ? commentsPerItem(enrich) * priceOf(prices, platform, 'comments') : priceOf(prices, platform, endpoint as ObjectEndpoint);
    if (!budget.tryHold(worst)) {
      tally.halted = (tally.halted ?? 0) + 1;
      return false;
    }
    // Counts made again are asked fresh, as tracking asks them: the API's cache may hold an answer
    // from before the failure, which would cost the same and be older than its time.
    const ask = endpoint === 'stats' || endpoint === 'channel-stats' ? { fresh: true } : {};
    const taken = comments
      ? await this.comments(platform, failure.subject, commentsPerItem(enrich), tally)
      : failure.key === this.secondDownloadKey(platform, failure.subject)
        ? await this.askAgainForMedia(platform, failure.subject, tally)
        : await this.objectCall(platform, endpoint as ObjectEndpoint, failure.subject, tally, ask);
    budget.release(worst - taken);
    return true;
  }

  /** Records a refusal that ends the work's buying (402, 401); false for any other error. */
  stopFor(error: SocialApiError): boolean {
    const stop = workStopOf(error);
    this.stop ??= stop;
    return stop !== undefined;
  }

  private async enrichItem(platform: Platform, url: string, tally: EnrichmentTally): Promise<void> {
    const held = this.worstOf(platform, url);
    const { limit, enrich } = this.deps;
    const calls = objectEnrichments(enrich, isPhotoPostUrl(url)).map((endpoint) => limit(() => this.objectCall(platform, endpoint, url, tally)));
    const comments = commentsPerItem(enrich);
    if (comments > 0) calls.push(limit(() => this.comments(platform, url, comments, tally)));
    const taken = (await settleAll(calls)).reduce((sum, credits) => sum + credits, 0);
    this.deps.budget.release(held - taken);
  }

  /**
   * Settles a landing found at `key` that this work began (its journal has the intent), or tells
   * that another target of the run landed it. Returns whether the key is already landed.
   */
  private async landedAlready(key: string): Promise<{ landed: boolean; ours: boolean; credits: number }> {
    const { journal, store } = this.deps;
    if (journal.isSettled(key)) return { landed: true, ours: true, credits: 0 };
    const landing = await store.findLanding(key);
    if (!landing || landing.kind !== 'page') return { landed: false, ours: false, credits: 0 };
    const ours = journal.hasOpenIntent(key);
    if (ours) await journal.settle(key, landing.call?.credits ?? 0);
    return { landed: true, ours, credits: landing.call?.credits ?? 0 };
  }

  /**
   * Tracking's call: observes an item's stats, or a channel's profile (channel-stats), again; the
   * caller holds its price, as for an item's enrichment. Fresh: an answer from the API's cache
   * would cost the same and tell nothing new.
   */
  async observe(platform: Platform, endpoint: 'stats' | 'channel-stats', subject: string, tally: EnrichmentTally): Promise<void> {
    const taken = await this.deps.limit(() => this.objectCall(platform, endpoint, subject, tally, { fresh: true }));
    this.deps.budget.release(priceOf(this.deps.prices, platform, endpoint) - taken);
  }

  /**
   * One object call about `subject` (an item's URL, or a channel's handle for channel-stats);
   * returns the credits it took out of the held budget (its worst case, once sent).
   */
  private async objectCall(platform: Platform, endpoint: ObjectEndpoint, subject: string, tally: EnrichmentTally, ask: { fresh?: boolean } = {}): Promise<number> {
    const key = itemLandingKey(this.deps.runId, platform, endpoint, subject);
    const found = await this.landedAlready(key);
    if (found.landed) {
      if (found.ours) tally.calls++;
      return 0;
    }
    if (this.stop) {
      tally.halted = (tally.halted ?? 0) + 1;
      return 0;
    }
    this.deps.signal.throwIfAborted();
    const worst = priceOf(this.deps.prices, platform, endpoint);
    this.deps.budget.release(worst);
    try {
      const { mediaMissing } = await this.buyObject(platform, endpoint, subject, 1, ask);
      tally.calls++;
      if (mediaMissing instanceof MediaExpiredError) await this.mediaExpired(platform, subject, tally);
      else if (mediaMissing) await this.mediaNotFetched(platform, subject, mediaMissing, tally);
    } catch (error) {
      if (!(await this.refused(key, { endpoint: `${platform}/${endpoint}`, subject }, error, tally))) throw error;
      // A feature the API has switched off is a fact to record, not a failure: it was not charged,
      // landed nothing, and so is skipped, not a call (the rule in enrichment-tally.ts).
      if (error instanceof FeatureUnavailableError) tally.skipped++;
    }
    return worst;
  }

  /**
   * One billed object call, landed as page `page` of its target; a download's answer lands with
   * its media file fetched into the store (withMedia). Says why that file is not in the store, if it is not.
   */
  private async buyObject(platform: Platform, endpoint: ObjectEndpoint, subject: string, page: number, ask: { fresh?: boolean }): Promise<{ mediaMissing?: Error }> {
    const { client, store, runId, harvest, journal } = this.deps;
    const target = itemTargetKey(platform, endpoint, subject);
    const params = { [findEndpoint(platform, endpoint)!.param]: subject };
    let mediaMissing: Error | undefined;
    await meteredCall({
      journal,
      key: pageLandingKey(runId, target, page),
      worst: priceOf(this.deps.prices, platform, endpoint),
      call: (options) => client.get(platform, endpoint, { ...params, ...ask }, { ...options, deadlineMs: this.deps.callDeadlineMs }),
      meter: { harvest, endpoint: `${platform}/${endpoint}` },
      land: async (result) => {
        let data: unknown = result.data;
        if (endpoint === 'download') ({ data, missing: mediaMissing } = await this.withMedia(subject, result.data as DownloadAnswer));
        await store.writeLanding(landingOfCall({ runId, harvest, target, page, params }, result, data), { untilSync: true });
      },
    });
    return mediaMissing ? { mediaMissing } : {};
  }

  /**
   * A download whose link expired before its file could be fetched: asked for again, once and
   * fresh, as a second billed call landed as page 2 of its target, when the work's grant has its
   * price free. When it has not, the call is recorded as failed under that page's key, and
   * `harvester retry` asks for it (redo).
   */
  private async mediaExpired(platform: Platform, url: string, tally: EnrichmentTally): Promise<void> {
    if (this.deps.budget.tryHold(priceOf(this.deps.prices, platform, 'download'))) {
      await this.askAgainForMedia(platform, url, tally);
      return;
    }
    const error = new MediaExpiredError('the media link expired before its file was fetched, and this work had no credits free to ask for a new one', { status: 410, code: 'media_expired' });
    await this.refused(this.secondDownloadKey(platform, url), { endpoint: `${platform}/download`, subject: url }, error, tally);
  }

  /**
   * A download whose link was good but whose file could not be fetched, through the retries (the
   * media host down, say): a failed call under the key of the download's second ask, so the run
   * says so and `harvester retry` asks for the download again, fresh, and fetches its file.
   */
  private async mediaNotFetched(platform: Platform, url: string, error: Error, tally: EnrichmentTally): Promise<void> {
    tally.failed++;
    const failure: CallFailure = { target: this.deps.target, endpoint: `${platform}/download`, subject: url, reason: `media file not fetched: ${error.name}: ${error.message}`, at: new Date().toISOString() };
    await this.deps.journal.fail(this.secondDownloadKey(platform, url), failure);
    this.deps.logger?.warn({ runId: this.deps.runId, item: url, reason: failure.reason }, 'media file not fetched');
  }

  /** Asks for a download again, fresh, as page 2 of its target; the caller holds its price. Returns the credits it took of it. */
  private async askAgainForMedia(platform: Platform, url: string, tally: EnrichmentTally): Promise<number> {
    const price = priceOf(this.deps.prices, platform, 'download');
    this.deps.budget.release(price);
    try {
      const { mediaMissing } = await this.buyObject(platform, 'download', url, 2, { fresh: true });
      tally.calls++;
      // Not asked a third time: the second ask is the one `harvester retry` makes again.
      if (mediaMissing) await this.mediaNotFetched(platform, url, mediaMissing, tally);
    } catch (error) {
      if (!(await this.refused(this.secondDownloadKey(platform, url), { endpoint: `${platform}/download`, subject: url }, error, tally))) throw error;
    }
    return price;
  }

  private secondDownloadKey(platform: Platform, url: string): string {
    return itemLandingKey(this.deps.runId, platform, 'download', url, 2);
  }

  /**
   * A download's answer with its media file fetched into the store while the link lives (it lives
   * at most an hour): `media` says the file's hash, size and type. A file that cannot be fetched
   * leaves the answer without `media`, and says why (`missing`: an expired link, so the caller
   * asks for a new one, or the error the fetch ended with); the landing keeps the link.
   */
  private async withMedia(url: string, answer: DownloadAnswer): Promise<{ data: DownloadAnswer & { media?: StoredMedia }; missing?: Error }> {
    if (!answer.media_url) return { data: answer };
    try {
      const file = await this.deps.client.fetchMedia(answer.media_url, { deadlineMs: this.deps.callDeadlineMs });
      return { data: { ...answer, media: await this.deps.store.storeMedia(this.deps.runId, file.bytes, file.contentType) } };
    } catch (error) {
      if (error instanceof FileWriteError) throw error;
      return { data: answer, missing: error as Error };
    }
  }

  /** The comments of one item, page by page up to `maxItems`; returns the credits taken from the held budget. */
  private async comments(platform: Platform, url: string, maxItems: number, tally: EnrichmentTally): Promise<number> {
    const { client, store, runId, harvest, journal, budget, prices } = this.deps;
    const target = commentsTargetKey(platform, url);
    const price = priceOf(prices, platform, 'comments');
    let taken = 0;
    let cursor: string | undefined;
    let got = 0;
    for (let page = 1; got < maxItems && !this.stop; page++) {
      const key = pageLandingKey(runId, target, page);
      const found = await this.landedAlready(key);
      if (found.landed) {
        if (!found.ours && page === 1) return taken;
        const landing = await store.findLanding(key);
        if (landing?.kind !== 'page') return taken;
        if (found.ours) tally.calls++;
        got += Array.isArray(landing.data) ? landing.data.length : 0;
        cursor = landing.next_cursor;
        if (!cursor) return taken;
        continue;
      }
      this.deps.signal.throwIfAborted();
      const limit = Math.min(COMMENTS_PAGE, maxItems - got);
      const worst = limit * price;
      budget.release(worst);
      taken += worst;
      try {
        const result = await meteredCall({
          journal,
          key,
          worst,
          call: (options) => client.page(platform, 'comments', { url, limit, cursor }, { ...options, deadlineMs: this.deps.callDeadlineMs }),
          meter: { harvest, endpoint: `${platform}/comments` },
          land: landAt(store, { runId, harvest, target, page, params: { url } }),
        });
        tally.calls++;
        got += result.items.length;
        cursor = result.nextCursor;
        if (!cursor) return taken;
      } catch (error) {
        if (!(await this.refused(key, { endpoint: `${platform}/comments`, subject: url }, error, tally))) throw error;
        return taken;
      }
    }
    // Left before its comments were all bought: the work stopped buying.
    if (got < maxItems) tally.halted = (tally.halted ?? 0) + 1;
    return taken;
  }

  /**
   * A call that failed for good: it counts as failed, and the journal records why with the API's
   * request id (a deleted item, an expired comments cursor, an answer the client refused), so
   * `show` tells it and a retry makes it again; unless it ends the work (402, 401: the item's
   * enrichment is then halted, to be made by a retry) or the feature is off. Returns false for
   * errors worth retrying (the activity is retried).
   */
  private async refused(key: string, call: { endpoint: string; subject: string }, error: unknown, tally: EnrichmentTally): Promise<boolean> {
    if (!(error instanceof SocialApiError) || error.retryable) return false;
    if (this.stopFor(error)) tally.halted = (tally.halted ?? 0) + 1;
    else if (!(error instanceof FeatureUnavailableError)) {
      tally.failed++;
      const failure: CallFailure = { target: this.deps.target, ...call, reason: `${error.name}: ${error.message}`, ...(error.requestId ? { request_id: error.requestId } : {}), at: new Date().toISOString() };
      await this.deps.journal.fail(key, failure);
      this.deps.logger?.warn({ runId: this.deps.runId, endpoint: call.endpoint, subject: call.subject, requestId: error.requestId, reason: failure.reason }, 'enrichment call failed');
    }
    return true;
  }
}

/**
 * Waits for every call to settle, failed or not, then throws the first failure, or returns their
 * values: none may still be writing to the journal once the activity has given up.
 */
export async function settleAll<T>(calls: readonly Promise<T>[]): Promise<T[]> {
  const outcomes = await Promise.allSettled(calls);
  const failed = outcomes.find((outcome) => outcome.status === 'rejected');
  if (failed) throw failed.reason;
  return outcomes.map((outcome) => (outcome as PromiseFulfilledResult<T>).value);
}

/** The refusals that end a piece of work's buying: 402 pauses the run, 401 fails it, a spent budget across runs stops it. */
export function workStopOf(error: SocialApiError): WorkStop | undefined {
  if (error instanceof InsufficientCreditsError) return { status: 'paused', error: describe(error) };
  if (error instanceof BudgetSpentError) return { status: 'budget_exhausted', error: describe(error) };
  if (error instanceof AuthenticationError) return { status: 'failed', error: describe(error) };
  return undefined;
}

export function describe(error: SocialApiError): WorkStop['error'] {
  return { type: error.name, message: error.message, ...(error.requestId ? { requestId: error.requestId } : {}) };
}
