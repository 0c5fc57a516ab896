/**
 * The metered call: how each billed call of a work spends the credits of its frame's grant
 * (work-frame.ts). Within the grant, it journals the call's worst case as an intent, calls the API,
 * lands the answer (page-landing.ts for a page), and settles the charge; it cancels the intent if
 * the API cannot have charged anything. The client's own retries go through the journal too:
 * before it sends a call again after an attempt whose answer was lost once the request had left,
 * that attempt stays journaled at its worst case, and once an attempt answers, each lost one is
 * settled at the same charge (the same request, so the same price). No attempt the API may have
 * charged is left out of the run's credits. The worker's metrics count each call as it goes
 * (src/metrics/worker-metrics.ts).
 */
import type { CallOptions } from '../src/api/client.js';
import { neverCharged, RateLimitedError, SocialApiError, type NetworkError } from '../src/api/errors.js';
import { calls, creditsCharged, creditsHeld, creditsRemaining, itemsLanded, landingsWaiting } from '../src/metrics/worker-metrics.js';
import type { CallJournal } from '../src/store/call-journal.js';
import { runFolderOfKey } from '../src/store/layout.js';
import { CallReservations } from './call-budgets.js';

/** What a metered call needs of its answer: what the API charged for it. */
interface Charged {
  creditsCharged: number;
}

export interface MeteredCall<R extends Charged> {
  journal: CallJournal;
  /** The landing key of the answer: what the journal's records name. */
  key: string;
  /** The most the call can cost: held in the journal until it settles. */
  worst: number;
  /** The API call, given the options that journal its repeated attempts. */
  call: (options: CallOptions) => Promise<R>;
  /**
   * Lands the answer durably; the charge settles only after it. `heldReservations`: the call's
   * reservations against the budgets across runs left open for a charge that comes later
   * (`chargedLater`), to be kept with what it landed; none otherwise.
   */
  land: (result: R, heldReservations: readonly string[]) => unknown;
  /**
   * For a call that must never be sent twice (a job start: a second would make a second job,
   * charged too): called instead of sending it again after an attempt whose answer was lost, it
   * throws, and the lost attempt's intent stays open at its worst case.
   */
  neverRepeat?: (lost: NetworkError) => never;
  /** The call's labels in the worker's metrics (src/metrics/worker-metrics.ts), and its items when it lists some. */
  meter: CallMeter;
  /**
   * The API charges the call later, not in its answer (a job's start: the job is charged when it
   * completes): its reservations against the budgets across runs are not settled at the answer's
   * charge of nothing, but handed to `land`, to be settled when the charge is known.
   */
  chargedLater?: boolean;
}

/** What the worker's metrics say of a call: its harvest and endpoint, and whether its answer's items are listed items. */
export interface CallMeter {
  harvest: string;
  endpoint: string;
  /** A listing page's items count as items landed; an enrichment's answer or a comments page does not. */
  listsItems?: boolean;
}

/**
 * Landing failures of this worker, by run (the first folder of a landing key). A store that could
 * not take an answer (a full disk, say) fails the attempt that met it, and would fail the others of
 * the run in flight here the same way: every attempt that was running when it happened sends no
 * more calls (a page's enrichment queued, the pages after), as each would be charged and then lost.
 * An attempt begun after it (a retry, once space is freed) buys as usual.
 */
const landingFailures = new Map<string, { error: unknown; at: number }>();
/** When each attempt's journal made its first call, on the same count as the failures' `at`. */
const journalsBegun = new WeakMap<CallJournal, number>();
let moments = 0;

/** Throws the landing failure of the run that this attempt was running at, if any. */
function refuseAfterLandingFailure(journal: CallJournal, key: string): void {
  if (!journalsBegun.has(journal)) journalsBegun.set(journal, ++moments);
  const failure = landingFailures.get(runFolderOfKey(key));
  if (failure && failure.at > journalsBegun.get(journal)!) throw failure.error;
}

function rememberLandingFailure(key: string, error: unknown): void {
  // The latest one: an attempt begun after an earlier failure stops at its own.
  const run = runFolderOfKey(key);
  landingFailures.delete(run);
  landingFailures.set(run, { error, at: ++moments });
  // A few runs' worth: the newest failures are the ones attempts in flight can meet.
  if (landingFailures.size > 64) landingFailures.delete(landingFailures.keys().next().value!);
}

export async function meteredCall<R extends Charged>({ journal, key, worst, call, land, neverRepeat, meter, chargedLater }: MeteredCall<R>): Promise<R> {
  const labels = { harvest: meter.harvest, endpoint: meter.endpoint };
  refuseAfterLandingFailure(journal, key);
  await journal.intend(key, worst);
  creditsHeld.inc({ harvest: meter.harvest }, worst);
  let lostAttempts = 0;
  // Its reservations against the budgets across runs that cover the run, if any (call-budgets.ts).
  const reservations = new CallReservations(journal.budgets, key, worst);
  const beforeRepeat = async (lost: NetworkError) => {
    neverRepeat?.(lost);
    await journal.intend(key, worst);
    reservations.lostAttempt();
    lostAttempts++;
    calls.inc({ ...labels, outcome: 'lost' });
  };
  const onRetry = (error: SocialApiError) => {
    if (error instanceof RateLimitedError) calls.inc({ ...labels, outcome: 'rate_limited' });
  };
  // The fence, right before each attempt goes on the wire, then the attempt's reservation against
  // the budgets across runs: an attempt refused at either was journaled and never sent, so its
  // intent is cancelled (in its run's late records if the run is over).
  let refusedBeforeSend = false;
  const beforeSend = async () => {
    try {
      await journal.fence();
      await reservations.beforeSend();
    } catch (error) {
      refusedBeforeSend = true;
      throw error;
    }
  };
  let result: R;
  try {
    result = await call({ beforeRepeat, onRetry, beforeSend });
  } catch (error) {
    creditsHeld.dec({ harvest: meter.harvest }, worst);
    let charged: number | undefined;
    if (refusedBeforeSend) await journal.cancel(key);
    else charged = await settleFailure(journal, key, error);
    await reservations.failed(refusedBeforeSend || neverCharged(error), charged);
    // Its earlier lost attempts stay open at their worst case, their charge unknown.
    if (charged !== undefined) creditsCharged.inc(labels, charged);
    calls.inc({ ...labels, outcome: error instanceof RateLimitedError ? 'rate_limited' : refusedBeforeSend || neverCharged(error) ? 'refused' : 'lost' });
    throw error;
  }
  // Charged, whatever comes of its landing: the budgets across runs settle at once (or, charged
  // later, when the charge is known).
  const heldReservations = chargedLater ? reservations.heldUntilCharged() : [];
  if (!chargedLater) await reservations.answered(result.creditsCharged);
  // Answered: its hold is released, and it was charged, landed or not. Each lost attempt was
  // charged what the one that answered was: the same request.
  creditsHeld.dec({ harvest: meter.harvest }, worst);
  creditsCharged.inc(labels, result.creditsCharged * (1 + lostAttempts));
  const remaining = (result as Partial<{ creditsRemaining: number }>).creditsRemaining;
  if (remaining !== undefined) creditsRemaining.set(remaining);
  try {
    await land(result, heldReservations);
  } catch (error) {
    rememberLandingFailure(key, error);
    calls.inc({ ...labels, outcome: 'lost' });
    // Charged, and not landed (a full disk, say): counted at its charge, as calls whose answers
    // were lost. If the journal cannot take that either, its intents stay open at their worst case.
    try {
      for (let attempt = 0; attempt <= lostAttempts; attempt++) await journal.settleLost(key, result.creditsCharged);
    } catch {
      /* the intents stand */
    }
    throw error;
  }
  // Landed: counted as such even if the journal's settlement below fails (the run reads the landing back).
  calls.inc({ ...labels, outcome: 'answered' });
  landingsWaiting.landed();
  const items = (result as Partial<{ items: unknown[] }>).items;
  if (meter.listsItems && Array.isArray(items)) itemsLanded.inc(labels, items.length);
  await journal.settle(key, result.creditsCharged);
  for (let attempt = 0; attempt < lostAttempts; attempt++) await journal.settleLost(key, result.creditsCharged);
  return result;
}

/**
 * The last attempt of a failed call: cancelled when the API cannot have charged it, settled at the
 * charge the API reported for an answer the client refused (it is not data), and otherwise left
 * open at its worst case. Earlier lost attempts stay open at their worst case.
 */
async function settleFailure(journal: CallJournal, key: string, error: unknown): Promise<number | undefined> {
  if (neverCharged(error)) await journal.cancel(key);
  else if (error instanceof SocialApiError && error.creditsCharged !== undefined) {
    await journal.settleLost(key, error.creditsCharged);
    return error.creditsCharged;
  }
  return undefined;
}

