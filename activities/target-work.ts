/**
 * One target's work in one long activity: its pages are listed one after another (cursors are
 * sequential), each landed durably and journaled, and each page's new items are enriched with
 * many calls in flight while the next page is listed. After a page is landed and enriched, the
 * activity heartbeats its position (cursor, page, items), so a retry resumes there: pages and
 * calls landed since are read back from disk, not bought again, and at most the calls in flight at
 * a crash are paid twice. The work never spends beyond the credits the workflow granted it.
 * Page data never leaves the activity: it returns counts, the position and what it spent.
 */
import { Context } from '@temporalio/activity';
import type { ListEndpoint, SocialApiClient } from '../src/api/client.js';
import { CursorExpiredError, SocialApiError } from '../src/api/errors.js';
import type { Enrichment } from '../src/harvest/harvest-types.js';
import type { PriceTable } from '../src/api-catalog/endpoints.js';
import type { Logger } from '../src/logger.js';
import { CallJournal } from '../src/store/call-journal.js';
import { pageLandingKey } from '../src/store/landing.js';
import type { Store } from '../src/store/store.js';
import { itemEnrichmentWorst, listsPhotoPosts, priceOf } from '../src/harvest/rules.js';
import { addTally, type EnrichmentTally } from '../src/harvest/enrichment-tally.js';
import type { ListingPosition } from '../src/harvest/run-state.js';
import type { TargetPlan } from '../src/harvest/targets.js';
import type { RunIdentity } from './run-guard.js';
import { CheckpointHeartbeat } from './checkpoint-heartbeat.js';
import { asActivityFailure } from './failures.js';
import { withWorkProgress } from './outages.js';
import { describe, ItemEnricher, workStopOf, type WorkStop } from './item-enricher.js';
import { claimJournal, landingOfCall, meteredCall, WorkBudget } from './metered-call.js';
import { withRunCallLimit } from './run-call-limits.js';

/** Where a target's listing stands: where the next page comes from, and what the run has of it. */
export interface TargetWorkInput extends RunIdentity {
  runId: string;
  harvest: string;
  target: TargetPlan;
  /** Names this piece of work and its journal; unique per run (the target and its first page). */
  workId: string;
  /** Credits it may spend, granted out of the run's budget. */
  grant: number;
  prices: PriceTable;
  enrich: Enrichment;
  pageSize: number;
  /** Enrichment calls in flight for the run, in this worker. */
  calls: number;
  from: ListingPosition;
  /** Items the warehouse already has (an incremental run after a complete listing): stop at the first. */
  stopAtIds: string[];
  /** Each billed call's overall deadline, its retries included (the harvest's `call_deadline_seconds`). */
  callDeadlineMs?: number;
}

export type TargetWorkStatus = 'done' | 'grant_spent' | 'failed' | 'paused';

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

export interface TargetWorkDeps {
  client: SocialApiClient;
  store: Store;
  logger?: Logger;
}

/** A cursor that keeps expiring before the next page is fetched would re-buy the list forever. */
const MAX_RELISTS = 3;

/** Pages whose items are enriched at once (besides the page being listed). */
const PAGES_ENRICHED_AT_ONCE = 3;

type ListedItem = { id: string; url?: string };

/** Ids of the items a run landed for a target, in its pages before `page`. */
async function landedIds(store: Store, runId: string, targetKey: string, page: number): Promise<Set<string>> {
  const ids = new Set<string>();
  for (let number = 1; number < page; number++) {
    const landing = await store.findLanding(pageLandingKey(runId, targetKey, number));
    if (landing?.kind === 'page' && Array.isArray(landing.data)) for (const item of landing.data as ListedItem[]) ids.add(item.id);
  }
  return ids;
}

export function targetWorkActivities({ client, store, logger }: TargetWorkDeps) {
  return {
    async harvestTarget(input: TargetWorkInput): Promise<TargetWorkResult> {
      const { runId, target } = input;
      const context = Context.current();
      const journal = await claimJournal(store, runId, input.workId, context.info.attempt);
      const budget = new WorkBudget(input.grant, journal);
      // What a retry resumes from: a page counts only once it is landed and its items enriched.
      const checkpoint = new CheckpointHeartbeat<Progress>(
        () => ({ position: { ...input.from }, pagesLanded: 0, itemsLanded: 0, enrichment: { calls: 0, skipped: 0, failed: 0 } }),
        (durable) => ({ credits: journal.charged(), items: durable.itemsLanded, pages: durable.pagesLanded, enriched: 0 }),
        // The journal's records of a page's calls (and, first, the run's answers) reach the disk before its position is heartbeated.
        () => journal.sync(),
      );
      const progress = checkpoint.resumed;
      const position = progress.position;
      let inFlight: Promise<unknown> = Promise.resolve();
      try {
        return await withRunCallLimit(runId, input.calls, async (callLimit) => {
          const enricher = target.enrich
            ? new ItemEnricher({ client, store, runId, harvest: input.harvest, target: target.key, journal, budget, limit: callLimit, enrich: input.enrich, prices: input.prices, signal: context.cancellationSignal, callDeadlineMs: input.callDeadlineMs, logger })
            : undefined;
          /** Calls of the pages up to the durable position; each page in flight counts its own. */
          const tally = { ...progress.enrichment };
          const seen = await landedIds(store, runId, target.key, position.page);
          // The position counts the distinct items landed, but the store may hold more than it
          // counted: an attempt Temporal gave up that still ran (a frozen worker) lands its answer
          // at a page's key over the shorter one its successor bought with what its grant had
          // left. Those items are the run's: counted, not listed again past max_items.
          position.items = Math.max(position.items, Math.min(seen.size, target.maxItems));
          const known = new Set(input.stopAtIds);
          const listPrice = priceOf(input.prices, target.platform, target.endpoint);
          const enrichWorst = enricher ? itemEnrichmentWorst(input.prices, target.platform, input.enrich, listsPhotoPosts(target)) : 0;
          /** Pages whose items are being enriched, oldest first, with the position after each. */
          const enriching: { done: Promise<void>; after: Omit<Progress, 'enrichment'>; tally: EnrichmentTally }[] = [];
          /** Set once a page's enrichment was halted (402, 401): the position stays before it. */
          let halted = false;
          const settleOldest = async () => {
            const oldest = enriching.shift()!;
            await oldest.done;
            halted ||= (oldest.tally.halted ?? 0) > 0;
            if (halted) return;
            addTally(tally, oldest.tally);
            checkpoint.commit({ ...oldest.after, enrichment: { ...tally } });
          };
          let stop: WorkStop | undefined;
          let ended: TargetWorkResult['ended'];

          while (!enricher?.stop) {
            // Temporal gave this attempt up (its heartbeat timed out) and another has its work.
            context.cancellationSignal.throwIfAborted();
            const wanted = target.maxItems - position.items;
            if (wanted <= 0) {
              ended = 'max_items';
              break;
            }
            const key = pageLandingKey(runId, target.key, position.page);
            let page: { items: ListedItem[]; nextCursor?: string; hasMore: boolean };
            /** Credits held for the enrichment of this page's items. */
            let held: number;
            const landed = await store.findLanding(key);
            if (landed?.kind === 'page') {
              // Landed by an attempt that died before its heartbeat: read back, not bought again. An
              // open intent is the landing's own only while the key is unsettled; once it is settled,
              // the open ones are attempts whose answers were lost, and stay counted as such.
              if (journal.hasOpenIntent(key) && !journal.isSettled(key)) await journal.settle(key, landed.call?.credits ?? 0);
              const items = (Array.isArray(landed.data) ? landed.data : []) as ListedItem[];
              page = { items, hasMore: landed.has_more ?? false, ...(landed.next_cursor ? { nextCursor: landed.next_cursor } : {}) };
              held = Math.min(enricher ? items.reduce((sum, item) => sum + (item.url ? enricher.worstOf(target.platform, item.url) : 0), 0) : 0, Math.max(0, budget.free()));
              budget.hold(held);
            } else {
              const size = Math.min(input.pageSize, wanted, position.nextLimit ?? input.pageSize);
              const limit = Math.min(size, Math.floor(budget.free() / (listPrice + enrichWorst)));
              if (limit < 1) break;
              held = limit * enrichWorst;
              budget.hold(held);
              try {
                const result = await meteredCall({
                  journal,
                  key,
                  worst: limit * listPrice,
                  call: (options) => client.page(target.platform, target.endpoint as ListEndpoint, { ...target.params, limit, cursor: position.cursor }, { ...options, deadlineMs: input.callDeadlineMs }),
                  meter: { harvest: input.harvest, endpoint: `${target.platform}/${target.endpoint}`, listsItems: true },
                  land: async (result) => {
                    const place = { runId, harvest: input.harvest, target: target.key, page: position.page, params: target.params, rankOffset: position.offset, nextCursor: result.nextCursor, hasMore: result.hasMore };
                    await store.writeLanding(landingOfCall(place, result, result.items));
                  },
                });
                page = { items: result.items as ListedItem[], hasMore: result.hasMore, ...(result.nextCursor ? { nextCursor: result.nextCursor } : {}) };
                if (input.stopAtIds.length > 0) position.nextLimit = Math.min(input.pageSize, limit * 2);
              } catch (failure) {
                budget.release(held);
                if (!(failure instanceof SocialApiError) || failure.retryable) throw failure;
                if (failure instanceof CursorExpiredError || failure.code === 'invalid_cursor') {
                  if (position.relists >= MAX_RELISTS) {
                    stop = { status: 'failed', error: { ...describe(failure), message: `${failure.message} (the list was started again ${MAX_RELISTS} times, and each time the cursor was refused before the next page)` } };
                    break;
                  }
                  // Cursors are short-lived, and one may be refused outright. Start again from the
                  // top: the items this run already has are recognised, not counted twice.
                  position.relists++;
                  position.cursor = undefined;
                  position.offset = 0;
                  position.nextLimit = input.pageSize;
                  logger?.warn({ target: target.key, code: failure.code, relists: position.relists }, 'cursor refused; listing again from the top');
                  continue;
                }
                stop = workStopOf(failure) ?? { status: 'failed', error: describe(failure) };
                break;
              }
            }

            const fresh: ListedItem[] = [];
            let reachedKnown = false;
            for (const item of page.items) {
              if (known.has(item.id)) {
                reachedKnown = true;
                break;
              }
              if (seen.has(item.id)) continue;
              seen.add(item.id);
              if (position.items + fresh.length < target.maxItems) fresh.push(item);
            }
            position.page++;
            position.items += fresh.length;
            position.offset += page.items.length;
            position.cursor = page.nextCursor;
            progress.pagesLanded++;
            progress.itemsLanded += fresh.length;

            // Enrich the new items whose worst cases the page's hold covers: all of them, unless
            // a crash's lost calls ate into the grant. Then the page is halted (given back, like a
            // 402's) and the work ends short of its grant, so the workflow grants more and the
            // next work enriches the rest, instead of the items going without. The rest of the
            // hold is given back.
            const pageTally: EnrichmentTally = { calls: 0, skipped: 0, failed: 0 };
            const urls: string[] = [];
            let needed = 0;
            let starved = false;
            for (const item of fresh) {
              if (!enricher || !item.url) continue;
              const worst = enricher.worstOf(target.platform, item.url);
              if (needed + worst > held) {
                pageTally.halted = (pageTally.halted ?? 0) + 1;
                starved = true;
                continue;
              }
              needed += worst;
              urls.push(item.url);
            }
            budget.release(held - needed);
            // A few pages are enriched at once, while the next is listed, so the calls in flight
            // stay full across page boundaries. A page's position becomes durable (and is
            // heartbeated) once it and every page before it are enriched.
            const done = enricher && urls.length > 0 ? enricher.enrich(target.platform, urls, pageTally) : Promise.resolve();
            done.catch(() => undefined);
            inFlight = Promise.allSettled([inFlight, done]);
            enriching.push({ done, after: structuredClone({ position, pagesLanded: progress.pagesLanded, itemsLanded: progress.itemsLanded }), tally: pageTally });
            while (enriching.length > PAGES_ENRICHED_AT_ONCE) await settleOldest();
            if (starved) break;

            if (reachedKnown) ended = 'known';
            else if (!page.hasMore || !page.nextCursor) ended = 'list_end';
            else if (position.items >= target.maxItems) ended = 'max_items';
            if (ended) break;
          }
          while (enriching.length > 0) await settleOldest();
          // What the result reports is durable before the workflow reads it.
          await checkpoint.flush();
          stop ??= enricher?.stop;
          const status: TargetWorkStatus = stop ? stop.status : ended && !halted ? 'done' : 'grant_spent';
          await store.writeCoverage(target.key, { complete: ended !== undefined && !halted, max_items: target.maxItems, run_id: runId, at: new Date().toISOString() });
          // Read back from the store, not from memory: an earlier attempt that Temporal gave up but
          // that had not yet stopped (its worker cut off from Temporal) may have journaled calls since.
          const totals = (await CallJournal.load(store.journals, runId, input.workId)).totals();
          // Halted pages are given back: the position is the last one whose items were enriched,
          // so a retry reads the pages after it back from disk and enriches their items.
          const reached = halted ? checkpoint.last : { ...progress, position };
          return {
            status,
            ...(ended && !halted ? { ended } : {}),
            position: reached.position,
            pagesLanded: reached.pagesLanded,
            itemsLanded: reached.itemsLanded,
            credits: totals.credits,
            lostCalls: totals.lostCalls,
            enrichment: tally,
            ...(stop ? { error: stop.error } : {}),
          };
        });
      } catch (failure) {
        throw withWorkProgress(asActivityFailure(failure), checkpoint.last);
      } finally {
        // Pages' enrichment may still be in flight when the listing failed: it must finish
        // before the journal closes (its own error, if any, is the lesser one).
        await inFlight;
        checkpoint.stop();
        // A sync still under way ends before the journal closes.
        await checkpoint.flush().catch(() => undefined);
        await journal.close();
      }
    },
  };
}
