/**
 * One target's work in one long activity: its pages are listed one after another (cursors are
 * sequential), each landed durably and journaled, and each page's new items are enriched with
 * many calls in flight while the next page is listed. After a page is landed and enriched, the
 * activity heartbeats its position (cursor, page, items), so a retry resumes there: pages and
 * calls landed since are read back from disk, not bought again, and at most the calls in flight at
 * a crash are paid twice. The work never spends beyond the credits the workflow granted it.
 * Page data never leaves the activity: it returns counts, the position and what it spent.
 */
import type { ListEndpoint } from '../src/api/client.js';
import { CursorExpiredError, SocialApiError } from '../src/api/errors.js';
import type { CallJournal } from '../src/store/call-journal.js';
import { pageLandingKey } from '../src/store/layout.js';
import type { Store } from '../src/store/store.js';
import { itemEnrichmentWorst, listsPhotoPosts, priceOf } from '../src/harvest/rules.js';
import { addTally, type EnrichmentTally } from '../src/harvest/enrichment-tally.js';
import type { ListingPosition } from '../src/harvest/run-state.js';
import type { TargetPlan } from '../src/harvest/targets.js';
import { MAX_RELISTS, Paginator } from '../src/harvest/paginator.js';
import type { RunIdentity } from './run-guard.js';
import { asActivityFailure } from './failures.js';
import { withWorkProgress } from './outages.js';
import { describe, ItemEnricher, workStopOf } from './item-enricher.js';
import type { WorkStop } from '../src/harvest/failures.js';
import { meteredCall } from './metered-call.js';
import { landAt } from './page-landing.js';
import { inWorkFrame, type WorkFrame, type WorkFrameDeps, type WorkFrameInput } from './work-frame.js';

/** Where a target's listing stands: where the next page comes from, and what the run has of it. */
export interface TargetWorkInput extends RunIdentity, WorkFrameInput {
  target: TargetPlan;
  pageSize: number;
  from: ListingPosition;
  /** Items the warehouse already has (an incremental run after a complete listing): stop at the first. */
  stopAtIds: string[];
}

export type TargetWorkStatus = 'done' | 'grant_spent' | 'failed' | 'paused' | 'budget_exhausted';

export interface TargetWorkResult {
  status: TargetWorkStatus;
  /** Why the listing is done: it has max_items, the list ended, or it reached known items. */
  ended?: 'max_items' | 'list_end' | 'known';
  position: ListingPosition;
  pagesLanded: number;
  itemsLanded: number;
  /** Credits this work committed (from its journal), lost calls' worst cases included. */
  credits: number;
  lostCalls: number;
  enrichment: EnrichmentTally;
  error?: WorkStop['error'];
}

interface Progress {
  position: ListingPosition;
  pagesLanded: number;
  itemsLanded: number;
  enrichment: EnrichmentTally;
}

/** What a target's work had durably reached when it failed for good: carried in its failure (activities/outages.ts). */
export type WorkProgress = Pick<Progress, 'position' | 'pagesLanded' | 'itemsLanded'>;

export type TargetWorkDeps = WorkFrameDeps;

/** Pages whose items are enriched at once (besides the page being listed). */
const PAGES_ENRICHED_AT_ONCE = 3;

type ListedItem = { id: string; url?: string };

interface Page {
  items: ListedItem[];
  nextCursor?: string;
  hasMore: boolean;
}

/** Ids of the items a run landed for a target, in its pages before `page`. */
async function landedIds(store: Store, runId: string, targetKey: string, page: number): Promise<Set<string>> {
  const ids = new Set<string>();
  for (let number = 1; number < page; number++) {
    const landing = await store.findLanding(pageLandingKey(runId, targetKey, number));
    if (landing?.kind === 'page' && Array.isArray(landing.data)) for (const item of landing.data as ListedItem[]) ids.add(item.id);
  }
  return ids;
}

/** What fetching the next page came to: a page (read back or bought) with its enrichment hold, or why the listing stops. */
type Fetched = { page: Page; held: number } | { relisted: true } | { stop: WorkStop } | { noBudget: true };

/**
 * One target's listing in one work: each page fetched (read back when landed, else bought), its
 * new items picked, their enrichment started, and the durable position committed as pages and
 * their enrichment finish.
 */
class TargetListing {
  private readonly progress: Progress;
  private readonly paging: Paginator;
  private readonly enricher: ItemEnricher | undefined;
  private readonly known: Set<string>;
  private readonly listPrice: number;
  private readonly enrichWorst: number;
  /** Calls of the pages up to the durable position; each page in flight counts its own. */
  private readonly tally: EnrichmentTally;
  /** Pages whose items are being enriched, oldest first, with the position after each. */
  private readonly enriching: { done: Promise<void>; after: Omit<Progress, 'enrichment'>; tally: EnrichmentTally }[] = [];
  /** Set once a page's enrichment was halted (402, 401): the position stays before it. */
  private halted = false;
  private stop: WorkStop | undefined;
  private ended: TargetWorkResult['ended'];

  constructor(
    private readonly deps: TargetWorkDeps,
    private readonly input: TargetWorkInput,
    private readonly frame: WorkFrame<Progress>,
    private readonly seen: Set<string>,
  ) {
    const { target, prices } = input;
    this.progress = frame.checkpoint.resumed;
    // The position counts the distinct items landed, but the store may hold more than it
    // counted: an attempt Temporal gave up that still ran (a frozen worker) lands its answer
    // at a page's key over the shorter one its successor bought with what its grant had
    // left. Those items are the run's: counted, not listed again past max_items.
    this.progress.position.items = Math.max(this.progress.position.items, Math.min(seen.size, target.maxItems));
    this.paging = new Paginator(this.progress.position, input.pageSize, target.maxItems, input.stopAtIds.length > 0);
    this.enricher = target.enrich ? new ItemEnricher({ ...frame.enricherParts, target: target.key }) : undefined;
    this.known = new Set(input.stopAtIds);
    this.listPrice = priceOf(prices, target.platform, target.endpoint);
    this.enrichWorst = this.enricher ? itemEnrichmentWorst(prices, target.platform, input.enrich, listsPhotoPosts(target)) : 0;
    this.tally = { ...this.progress.enrichment };
  }

  async run(): Promise<TargetWorkResult> {
    while (!this.enricher?.stop) {
      // Temporal gave this attempt up (its heartbeat timed out) and another has its work.
      this.frame.context.cancellationSignal.throwIfAborted();
      if (this.paging.wanted() <= 0) {
        this.ended = 'max_items';
        break;
      }
      const fetched = await this.fetchPage();
      if ('relisted' in fetched) continue;
      if ('noBudget' in fetched) break;
      if ('stop' in fetched) {
        this.stop = fetched.stop;
        break;
      }
      if (await this.take(fetched.page, fetched.held)) break;
    }
    while (this.enriching.length > 0) await this.settleOldest();
    return this.result();
  }

  /** The next page: read back when an earlier attempt landed it, else bought within the grant. */
  private async fetchPage(): Promise<Fetched> {
    const { store } = this.deps;
    const { runId, target } = this.input;
    const key = pageLandingKey(runId, target.key, this.paging.position.page);
    const landed = await store.findLanding(key);
    if (landed?.kind !== 'page') return this.buyPage(key);
    // Landed by an attempt that died before its heartbeat: read back, not bought again. An
    // open intent is the landing's own only while the key is unsettled; once it is settled,
    // the open ones are attempts whose answers were lost, and stay counted as such.
    const { journal, budget } = this.frame;
    if (journal.hasOpenIntent(key) && !journal.isSettled(key)) await journal.settle(key, landed.call?.credits ?? 0);
    const items = (Array.isArray(landed.data) ? landed.data : []) as ListedItem[];
    const enricher = this.enricher;
    const held = Math.min(enricher ? items.reduce((sum, item) => sum + (item.url ? enricher.worstOf(target.platform, item.url) : 0), 0) : 0, Math.max(0, budget.free()));
    budget.hold(held);
    return { page: { items, hasMore: landed.has_more ?? false, ...(landed.next_cursor ? { nextCursor: landed.next_cursor } : {}) }, held };
  }

  /** Buys the next page, as many items as the grant covers with their enrichment, and lands it. */
  private async buyPage(key: string): Promise<Fetched> {
    const { client, store } = this.deps;
    const { input, paging, frame } = this;
    const { runId, target } = input;
    const position = paging.position;
    const limit = Math.min(paging.nextSize(), Math.floor(frame.budget.free() / (this.listPrice + this.enrichWorst)));
    if (limit < 1) return { noBudget: true };
    const held = limit * this.enrichWorst;
    frame.budget.hold(held);
    try {
      const result = await meteredCall({
        journal: frame.journal,
        key,
        worst: limit * this.listPrice,
        call: (options) => client.page(target.platform, target.endpoint as ListEndpoint, { ...target.params, limit, cursor: position.cursor }, { ...options, deadlineMs: input.callDeadlineMs }),
        meter: { harvest: input.harvest, endpoint: `${target.platform}/${target.endpoint}`, listsItems: true },
        land: landAt(store, { runId, harvest: input.harvest, target: target.key, page: position.page, params: target.params, rankOffset: position.offset }),
      });
      paging.bought(limit);
      return { page: { items: result.items as ListedItem[], hasMore: result.hasMore, ...(result.nextCursor ? { nextCursor: result.nextCursor } : {}) }, held };
    } catch (failure) {
      frame.budget.release(held);
      return this.refused(failure);
    }
  }

  /** A page the API refused: a refused cursor starts the list again, anything else not retryable stops the work. */
  private refused(failure: unknown): Fetched {
    if (!(failure instanceof SocialApiError) || failure.retryable) throw failure;
    if (!(failure instanceof CursorExpiredError || failure.code === 'invalid_cursor')) return { stop: workStopOf(failure) ?? { status: 'failed', error: describe(failure) } };
    if (!this.paging.relist()) {
      return { stop: { status: 'failed', error: { ...describe(failure), message: `${failure.message} (the list was started again ${MAX_RELISTS} times, and each time the cursor was refused before the next page)` } } };
    }
    this.deps.logger?.warn({ target: this.input.target.key, code: failure.code, relists: this.paging.position.relists }, 'cursor refused; listing again from the top');
    return { relisted: true };
  }

  /** Takes a page's new items and starts their enrichment; true when the listing ends with it. */
  private async take(page: Page, held: number): Promise<boolean> {
    const { target } = this.input;
    const { fresh, reachedKnown } = this.freshItems(page);
    this.paging.advance(page, fresh.length);
    this.progress.pagesLanded++;
    this.progress.itemsLanded += fresh.length;
    const starved = this.enrichPage(fresh, held);
    while (this.enriching.length > PAGES_ENRICHED_AT_ONCE) await this.settleOldest();
    if (starved) return true;
    if (reachedKnown) this.ended = 'known';
    else if (!page.hasMore || !page.nextCursor) this.ended = 'list_end';
    else if (this.paging.position.items >= target.maxItems) this.ended = 'max_items';
    return this.ended !== undefined;
  }

  /** A page's items the run does not have yet, up to max_items, and whether it reached a known one. */
  private freshItems(page: Page): { fresh: ListedItem[]; reachedKnown: boolean } {
    const fresh: ListedItem[] = [];
    for (const item of page.items) {
      if (this.known.has(item.id)) return { fresh, reachedKnown: true };
      if (this.seen.has(item.id)) continue;
      this.seen.add(item.id);
      if (this.paging.position.items + fresh.length < this.input.target.maxItems) fresh.push(item);
    }
    return { fresh, reachedKnown: false };
  }

  /**
   * Enriches the new items whose worst cases the page's hold covers: all of them, unless a crash's
   * lost calls ate into the grant. Then the page is halted (given back, like a 402's) and the work
   * ends short of its grant, so the workflow grants more and the next work enriches the rest,
   * instead of the items going without. The rest of the hold is given back. True when starved.
   */
  private enrichPage(fresh: ListedItem[], held: number): boolean {
    const { enricher, frame } = this;
    const pageTally: EnrichmentTally = { calls: 0, skipped: 0, failed: 0 };
    const urls: string[] = [];
    let needed = 0;
    let starved = false;
    for (const item of fresh) {
      if (!enricher || !item.url) continue;
      const worst = enricher.worstOf(this.input.target.platform, item.url);
      if (needed + worst > held) {
        pageTally.halted = (pageTally.halted ?? 0) + 1;
        starved = true;
        continue;
      }
      needed += worst;
      urls.push(item.url);
    }
    frame.budget.release(held - needed);
    // A few pages are enriched at once, while the next is listed, so the calls in flight stay full
    // across page boundaries. A page's position becomes durable (and is heartbeated) once it and
    // every page before it are enriched.
    const done = enricher && urls.length > 0 ? enricher.enrich(this.input.target.platform, urls, pageTally) : Promise.resolve();
    frame.keep(done);
    const { position, pagesLanded, itemsLanded } = this.progress;
    this.enriching.push({ done, after: structuredClone({ position, pagesLanded, itemsLanded }), tally: pageTally });
    return starved;
  }

  /** The oldest page's enrichment finished: its position becomes durable, unless a page was halted. */
  private async settleOldest(): Promise<void> {
    const oldest = this.enriching.shift()!;
    await oldest.done;
    this.halted ||= (oldest.tally.halted ?? 0) > 0;
    if (this.halted) return;
    addTally(this.tally, oldest.tally);
    // Durable (and heartbeated) at the frame's next group commit.
    this.frame.checkpoint.commit({ ...oldest.after, enrichment: { ...this.tally } });
  }

  private async result(): Promise<TargetWorkResult> {
    const { store } = this.deps;
    const { runId, target } = this.input;
    const { ended, halted } = this;
    const stop = this.stop ?? this.enricher?.stop;
    const status: TargetWorkStatus = stop ? stop.status : ended && !halted ? 'done' : 'grant_spent';
    // What the result and the coverage say is durable before they are said.
    await this.frame.durable();
    await store.writeCoverage(target.key, { complete: ended !== undefined && !halted, max_items: target.maxItems, run_id: runId, at: new Date().toISOString() });
    const spent = await this.frame.spent();
    // Halted pages are given back: the position is the last one whose items were enriched,
    // so a retry reads the pages after it back from disk and enriches their items.
    const reached = halted ? this.frame.checkpoint.last : { ...this.progress, position: this.paging.position };
    return {
      status,
      ...(ended && !halted ? { ended } : {}),
      position: reached.position,
      pagesLanded: reached.pagesLanded,
      itemsLanded: reached.itemsLanded,
      credits: spent.credits,
      lostCalls: spent.lostCalls,
      enrichment: this.tally,
      ...(stop ? { error: stop.error } : {}),
    };
  }
}

export function targetWorkActivities(deps: TargetWorkDeps) {
  return {
    async harvestTarget(input: TargetWorkInput): Promise<TargetWorkResult> {
      // What a retry resumes from: a page counts only once it is landed and its items enriched.
      const checkpoint = {
        start: (): Progress => ({ position: { ...input.from }, pagesLanded: 0, itemsLanded: 0, enrichment: { calls: 0, skipped: 0, failed: 0 } }),
        live: (durable: Progress, journal: CallJournal) => ({ credits: journal.charged(), items: durable.itemsLanded, pages: durable.pagesLanded, enriched: 0 }),
      };
      return inWorkFrame(
        deps,
        input,
        checkpoint,
        async (frame) => new TargetListing(deps, input, frame, await landedIds(deps.store, input.runId, input.target.key, frame.checkpoint.resumed.position.page)).run(),
        (failure, heartbeat) => withWorkProgress(asActivityFailure(failure), heartbeat.last),
      );
    },
  };
}
