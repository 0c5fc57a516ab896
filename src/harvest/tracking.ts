/**
 * Tracking: observing known items again as they age. Engagement moves fastest while an item is
 * young, so observations follow its age: an item is observed once it reaches each planned age
 * (1 h, 6 h, 1 d, 3 d, 7 d, 14 d, 30 d) that its harvest's window covers, at the first run after
 * it does. A run observes the items that are due, most overdue first, as far as its budget goes.
 * Times are on the API's clock (the `Date` of its answers), so an emulated clock drives them.
 */

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/** The ages at which an item is observed, when the schedule allows. */
export const OBSERVATION_AGES_MS = [HOUR_MS, 6 * HOUR_MS, DAY_MS, 3 * DAY_MS, 7 * DAY_MS, 14 * DAY_MS, 30 * DAY_MS] as const;

/** The most days `track.items` may cover: past the last planned age, nothing is ever due. */
export const MAX_TRACKED_DAYS = Math.max(...OBSERVATION_AGES_MS) / DAY_MS;

export interface TrackedItem {
  url: string;
  postedAtMs: number;
  /** When the item was last observed (API clock), if ever. */
  lastObservedAtMs?: number;
}

/** An item due for an observation: the planned age it reached, and how long ago it reached it. */
export interface DueObservation<T extends TrackedItem = TrackedItem> {
  item: T;
  plannedAgeMs: number;
  overdueMs: number;
}

/**
 * The oldest posting time a tracked item may have at `nowMs`: the window, and a day's grace, so an
 * item that reached the window's last planned age between two runs is still observed at it.
 */
export function trackedSinceMs(nowMs: number, windowDays: number): number {
  return nowMs - (windowDays + 1) * DAY_MS;
}

/**
 * The planned age an item is due to be observed at, at `nowMs`: the oldest planned age within
 * the window that it has reached and that came after its last observation; none when it has
 * been observed since its latest reached age, or is older than the window.
 */
export function dueAge(item: TrackedItem, nowMs: number, windowDays: number): number | undefined {
  const ageMs = nowMs - item.postedAtMs;
  const windowMs = windowDays * DAY_MS;
  if (ageMs < 0 || item.postedAtMs < trackedSinceMs(nowMs, windowDays)) return undefined;
  const observedAgeMs = item.lastObservedAtMs === undefined ? -1 : item.lastObservedAtMs - item.postedAtMs;
  const reached = OBSERVATION_AGES_MS.filter((planned) => planned <= windowMs && planned <= ageMs && planned > observedAgeMs);
  // Several ages passed since the last observation (a paused schedule): one observation covers them.
  return reached.length === 0 ? undefined : reached[reached.length - 1];
}

/** The items due for an observation at `nowMs`, most overdue first (then the oldest posted). */
export function dueObservations<T extends TrackedItem>(items: readonly T[], nowMs: number, windowDays: number): DueObservation<T>[] {
  const due: DueObservation<T>[] = [];
  for (const item of items) {
    const plannedAgeMs = dueAge(item, nowMs, windowDays);
    if (plannedAgeMs !== undefined) due.push({ item, plannedAgeMs, overdueMs: nowMs - (item.postedAtMs + plannedAgeMs) });
  }
  return due.sort((a, b) => b.overdueMs - a.overdueMs || a.item.postedAtMs - b.item.postedAtMs || (a.item.url < b.item.url ? -1 : 1));
}

/** What tracking's items will cost in a run: those due at the API's time `asOfMs`, by target. */
export interface TrackingForecast {
  asOfMs: number;
  /** Due items by the key of the target that landed them (the first, in config order). */
  due: Record<string, number>;
  /** Their stats, at the price table's prices. */
  credits: number;
}
