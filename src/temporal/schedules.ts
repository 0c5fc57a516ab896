import {
  ScheduleNotFoundError,
  ScheduleOverlapPolicy,
  type Client,
  type ScheduleDescription,
  type ScheduleOptionsStartWorkflowAction,
  type ScheduleSpec,
  type Workflow,
} from '@temporalio/client';
import type { ApiIdentity } from '../api-catalog/api-identity.js';
import { HARVEST_WORKFLOW_TYPE } from '../../workflows/definitions.js';
import type { StoreIdentity } from '../store/store-identity.js';
import type { Harvest } from '../harvest/harvest-types.js';

/**
 * Each harvest with a `schedule` in the config has a Temporal Schedule, `harvest-<name>`, that
 * starts `harvestWorkflow` with `[{ harvest }]` on the harvester's task queue (workflow ids
 * `sched-<name>-<time>`). `applyHarvestSchedules` makes Temporal match the config; the rest
 * describe, pause, resume, trigger and delete one schedule.
 */

const SCHEDULE_ID_PREFIX = 'harvest-';

/** Each harvest's Temporal Schedule is named after it. */
export function scheduleIdOf(harvest: string): string {
  return `${SCHEDULE_ID_PREFIX}${harvest}`;
}

/** The harvest a schedule id names, or undefined for another schedule. */
export function harvestOfScheduleId(scheduleId: string): string | undefined {
  return scheduleId.startsWith(SCHEDULE_ID_PREFIX) ? scheduleId.slice(SCHEDULE_ID_PREFIX.length) : undefined;
}

/** Runs a schedule starts are named `sched-<name>-<time>` (Temporal appends the time). */
export function scheduledWorkflowIdPrefix(harvest: string): string {
  return `sched-${harvest}`;
}

/** A run still going when the next is due: the next is skipped. */
export const SCHEDULE_OVERLAP = ScheduleOverlapPolicy.SKIP;
/** After an outage, a run missed by less than this is still started; older ones are dropped. */
export const SCHEDULE_CATCHUP_WINDOW_MS = 60 * 60 * 1000;

/** Pauses a harvest's schedule with a note saying why; a harvest without a schedule is left alone. */
export async function pauseHarvestSchedule(client: Client, harvest: string, note: string): Promise<boolean> {
  try {
    await client.schedule.getHandle(scheduleIdOf(harvest)).pause(note);
    return true;
  } catch (error) {
    if (error instanceof ScheduleNotFoundError) return false;
    throw error;
  }
}

/** Every harvest schedule's id. */
export async function harvestScheduleIds(client: Client): Promise<string[]> {
  const ids: string[] = [];
  for await (const schedule of client.schedule.list()) if (schedule.scheduleId.startsWith('harvest-')) ids.push(schedule.scheduleId);
  return ids;
}

// ---- what a schedule should be ------------------------------------------------------------------

export type ScheduledHarvest = Harvest & { schedule: NonNullable<Harvest['schedule']> };

export interface DesiredSchedule {
  scheduleId: string;
  harvest: string;
  cron: string;
  timezone: string;
  spec: ScheduleSpec;
  action: ScheduleOptionsStartWorkflowAction<Workflow>;
  policies: { overlap: ScheduleOverlapPolicy; catchupWindow: number };
}

/** `0  6 * * *` and `0 6 * * *` are the same schedule. */
function normalCron(cron: string): string {
  return cron.trim().split(/\s+/).join(' ');
}

/** What the schedule's runs carry (see activities/run-guard.ts): the API and store they are for; a worker for another refuses them. */
export interface ScheduledRunIdentity {
  api?: ApiIdentity;
  store?: StoreIdentity;
}

/** `run`: the API and store the schedule's runs are for (src/api/identity.ts, src/store/store-identity.ts). */
export function desiredScheduleOf(harvest: ScheduledHarvest, taskQueue: string, run: ScheduledRunIdentity = {}): DesiredSchedule {
  const { api, store } = run;
  const cron = normalCron(harvest.schedule.cron);
  return {
    scheduleId: scheduleIdOf(harvest.name),
    harvest: harvest.name,
    cron,
    timezone: harvest.schedule.timezone,
    // Temporal keeps a cron expression only compiled into a calendar; the comment after # keeps
    // its text in that calendar, so `list` can show it and `apply` can compare it.
    spec: { cronExpressions: [`${cron} # ${cron}`], timezone: harvest.schedule.timezone },
    action: { type: 'startWorkflow', workflowType: HARVEST_WORKFLOW_TYPE, taskQueue, workflowId: scheduledWorkflowIdPrefix(harvest.name), args: [{ harvest, ...(api ? { api } : {}), ...(store ? { store } : {}) }] },
    policies: { overlap: SCHEDULE_OVERLAP, catchupWindow: SCHEDULE_CATCHUP_WINDOW_MS },
  };
}

/** The cron a schedule was made from, when it was made by `apply` and not changed since. */
export function cronOf(description: Pick<ScheduleDescription, 'spec'>): string | undefined {
  const { calendars = [], intervals = [], skip = [] } = description.spec;
  if (calendars.length !== 1 || intervals.length > 0 || skip.length > 0) return undefined;
  const comment = calendars[0]?.comment?.trim();
  return comment ? comment : undefined;
}

/** JSON with sorted keys, to compare decoded action arguments with the config's. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, inner: unknown) =>
    inner !== null && typeof inner === 'object' && !Array.isArray(inner)
      ? Object.fromEntries(Object.entries(inner as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : inner,
  );
}

/** A run argument `{ harvest }` without the harvest's schedule. */
/** A run argument without the harvest's schedule, the API and the store: each is compared, and said, on its own. */
function withoutSchedule(arg: unknown): unknown {
  if (arg === null || typeof arg !== 'object' || !('harvest' in arg)) return arg;
  const harvest = (arg as { harvest: unknown }).harvest;
  if (harvest === null || typeof harvest !== 'object') return arg;
  const { schedule: _schedule, ...rest } = harvest as Record<string, unknown>;
  const { api: _api, store: _store, ...others } = arg as Record<string, unknown>;
  return { ...others, harvest: rest };
}

/** What differs between a schedule and what the config wants of it; empty when they match. */
export function scheduleDifferences(current: ScheduleDescription, desired: DesiredSchedule): string[] {
  const changes: string[] = [];
  const cron = cronOf(current);
  if (cron !== desired.cron) changes.push(`cron ${cron ?? '(not set by apply)'} → ${desired.cron}`);
  const timezone = current.spec.timezone || '(none)';
  if (timezone !== desired.timezone) changes.push(`timezone ${timezone} → ${desired.timezone}`);
  if (current.spec.startAt || current.spec.endAt) changes.push('start/end times dropped');
  const action = current.action;
  if (action.workflowType !== desired.action.workflowType) changes.push(`workflow ${action.workflowType} → ${String(desired.action.workflowType)}`);
  if (action.taskQueue !== desired.action.taskQueue) changes.push(`task queue ${action.taskQueue} → ${desired.action.taskQueue}`);
  if (action.workflowId !== desired.action.workflowId) changes.push(`workflow id prefix ${action.workflowId} → ${desired.action.workflowId}`);
  const apiOf = (args: readonly unknown[] | undefined) => canonical((args?.[0] as { api?: unknown } | undefined)?.api ?? null);
  if (apiOf(action.args) !== apiOf(desired.action.args)) changes.push('the API its runs are for');
  const storeIdOf = (args: readonly unknown[] | undefined) => (args?.[0] as { store?: StoreIdentity } | undefined)?.store?.id ?? null;
  if (storeIdOf(action.args) !== storeIdOf(desired.action.args)) changes.push('the data directory its runs are for');
  if (canonical(action.args ?? []) !== canonical(desired.action.args ?? [])) {
    // The arguments carry the harvest, its schedule included: a new cron alone is said once, above.
    const rest = (args: readonly unknown[] | undefined) => canonical((args ?? []).map((arg) => withoutSchedule(arg)));
    if (rest(action.args) !== rest(desired.action.args) || changes.length === 0) changes.push('harvest config (the run arguments)');
  }
  if (current.policies.overlap !== desired.policies.overlap) changes.push(`overlap policy ${current.policies.overlap} → ${desired.policies.overlap}`);
  if (current.policies.catchupWindow !== desired.policies.catchupWindow) changes.push(`catch-up window ${current.policies.catchupWindow} ms → ${desired.policies.catchupWindow} ms`);
  return changes;
}

// ---- apply --------------------------------------------------------------------------------------

export interface ApplyResult {
  taskQueue: string;
  created: { id: string; harvest: string; cron: string; timezone: string }[];
  updated: { id: string; harvest: string; changes: string[] }[];
  deleted: { id: string; harvest: string; reason: string }[];
  kept: { id: string; harvest: string }[];
  /** harvest-* schedules that start runs elsewhere (another task queue or workflow): not this config's to delete. */
  ignored: { id: string; reason: string }[];
  failed: { id: string; harvest: string; error: string }[];
}

async function describeOrUndefined(client: Client, scheduleId: string): Promise<ScheduleDescription | undefined> {
  try {
    return await client.schedule.getHandle(scheduleId).describe();
  } catch (error) {
    if (error instanceof ScheduleNotFoundError) return undefined;
    throw error;
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Makes the Temporal Schedules match the config: creates the missing ones, updates changed ones
 * (keeping their paused state and note), and deletes the `harvest-*` schedules of this task queue
 * whose harvest is gone from the config or has no schedule any more. Schedules that start runs on
 * another task queue belong to another deployment and are left alone.
 */
export async function applyHarvestSchedules(client: Client, harvests: readonly Harvest[], taskQueue: string, run: ScheduledRunIdentity = {}): Promise<ApplyResult> {
  const result: ApplyResult = { taskQueue, created: [], updated: [], deleted: [], kept: [], ignored: [], failed: [] };
  const wanted = new Set<string>();
  for (const harvest of harvests) {
    if (!harvest.schedule) continue;
    const desired = desiredScheduleOf(harvest as ScheduledHarvest, taskQueue, run);
    wanted.add(desired.scheduleId);
    try {
      const current = await describeOrUndefined(client, desired.scheduleId);
      if (!current) {
        await client.schedule.create({ scheduleId: desired.scheduleId, spec: desired.spec, action: desired.action, policies: desired.policies });
        result.created.push({ id: desired.scheduleId, harvest: harvest.name, cron: desired.cron, timezone: desired.timezone });
        continue;
      }
      const changes = scheduleDifferences(current, desired);
      if (changes.length === 0) {
        result.kept.push({ id: desired.scheduleId, harvest: harvest.name });
        continue;
      }
      // The state (paused, its note) is kept: a schedule paused for credits.low stays paused.
      await client.schedule.getHandle(desired.scheduleId).update((previous) => ({ ...previous, spec: desired.spec, action: desired.action, policies: desired.policies }));
      result.updated.push({ id: desired.scheduleId, harvest: harvest.name, changes });
    } catch (error) {
      result.failed.push({ id: desired.scheduleId, harvest: harvest.name, error: messageOf(error) });
    }
  }

  const byName = new Map(harvests.map((harvest) => [harvest.name, harvest]));
  for (const id of (await harvestScheduleIds(client)).sort()) {
    if (wanted.has(id)) continue;
    const name = harvestOfScheduleId(id) as string;
    try {
      // Listing is eventually consistent: a schedule deleted a moment ago may still be listed.
      const current = await describeOrUndefined(client, id);
      if (!current) continue;
      if (current.action.workflowType !== HARVEST_WORKFLOW_TYPE) {
        result.ignored.push({ id, reason: `starts ${current.action.workflowType}, not ${HARVEST_WORKFLOW_TYPE}` });
        continue;
      }
      if (current.action.taskQueue !== taskQueue) {
        result.ignored.push({ id, reason: `starts runs on task queue ${current.action.taskQueue}, not ${taskQueue}` });
        continue;
      }
      await client.schedule.getHandle(id).delete();
      const reason = byName.has(name) ? `harvest ${name} has no schedule in the config` : `no harvest ${name} in the config`;
      result.deleted.push({ id, harvest: name, reason });
    } catch (error) {
      if (error instanceof ScheduleNotFoundError) continue;
      result.failed.push({ id, harvest: name, error: messageOf(error) });
    }
  }
  return result;
}

// ---- one schedule -------------------------------------------------------------------------------

export interface ScheduledRun {
  scheduledAt: string;
  takenAt: string;
  workflowId: string;
}

/** A harvest schedule as `harvester schedules list` shows it. */
export interface HarvestScheduleView {
  id: string;
  harvest: string;
  /** The cron it was applied with; undefined when its spec was not made by `apply`. */
  cron?: string;
  timezone: string;
  paused: boolean;
  /** Why it is paused (or the last pause/resume note). */
  note?: string;
  taskQueue: string;
  workflowType: string;
  workflowIdPrefix?: string;
  overlap: string;
  catchupWindowMs: number;
  /** When it starts its next runs; none while it is paused (Temporal lists them all the same). */
  nextRuns: string[];
  /** Newest last. */
  recentRuns: ScheduledRun[];
  runningWorkflows: string[];
  actionsTaken: number;
  skippedForOverlap: number;
}

function iso(date: Date): string {
  return date.toISOString().replace(/\.000Z$/, 'Z');
}

export function scheduleView(description: ScheduleDescription): HarvestScheduleView {
  const cron = cronOf(description);
  const note = description.state.note;
  return {
    id: description.scheduleId,
    harvest: harvestOfScheduleId(description.scheduleId) ?? description.scheduleId,
    ...(cron ? { cron } : {}),
    timezone: description.spec.timezone || 'UTC',
    paused: description.state.paused,
    ...(note ? { note } : {}),
    taskQueue: description.action.taskQueue,
    workflowType: description.action.workflowType,
    ...(description.action.workflowId ? { workflowIdPrefix: description.action.workflowId } : {}),
    // Unspecified means the server's default, which is SKIP.
    overlap: description.policies.overlap ?? ScheduleOverlapPolicy.SKIP,
    catchupWindowMs: description.policies.catchupWindow,
    // A paused schedule starts nothing: the times Temporal lists are when it would, once resumed.
    nextRuns: description.state.paused ? [] : description.info.nextActionTimes.map(iso),
    recentRuns: description.info.recentActions.map((run) => ({ scheduledAt: iso(run.scheduledAt), takenAt: iso(run.takenAt), workflowId: run.action.workflow.workflowId })),
    runningWorkflows: description.info.runningActions.map((run) => run.workflow.workflowId),
    actionsTaken: description.info.numActionsTaken,
    skippedForOverlap: description.info.numActionsSkippedOverlap,
  };
}

/** One harvest's schedule; throws ScheduleNotFoundError when it has none. */
export async function describeHarvestSchedule(client: Client, harvest: string): Promise<HarvestScheduleView> {
  return scheduleView(await client.schedule.getHandle(scheduleIdOf(harvest)).describe());
}

/** Every harvest schedule, by id. */
export async function listHarvestSchedules(client: Client): Promise<HarvestScheduleView[]> {
  const views: HarvestScheduleView[] = [];
  for (const id of (await harvestScheduleIds(client)).sort()) {
    const description = await describeOrUndefined(client, id);
    if (description) views.push(scheduleView(description));
  }
  return views;
}

/** Resumes a paused schedule; false when it was not paused. Throws ScheduleNotFoundError. */
export async function resumeHarvestSchedule(client: Client, harvest: string, note: string): Promise<boolean> {
  const handle = client.schedule.getHandle(scheduleIdOf(harvest));
  const wasPaused = (await handle.describe()).state.paused;
  await handle.unpause(note);
  return wasPaused;
}

/** Pauses a schedule with a note; throws ScheduleNotFoundError (unlike pauseHarvestSchedule). */
export async function pauseExistingHarvestSchedule(client: Client, harvest: string, note: string): Promise<void> {
  await client.schedule.getHandle(scheduleIdOf(harvest)).pause(note);
}

export async function deleteHarvestSchedule(client: Client, harvest: string): Promise<void> {
  await client.schedule.getHandle(scheduleIdOf(harvest)).delete();
}

export type TriggerResult =
  | { outcome: 'started'; workflowId: string }
  | { outcome: 'skipped'; running: string[]; overlap: string }
  /** The scheduler had not acted when the wait ran out. */
  | { outcome: 'requested' };

/**
 * Starts a run now, as if its time had come: under the schedule's overlap policy, so with SKIP a
 * run still going means none is started. Waits (briefly) to say which it was.
 */
export async function triggerHarvestSchedule(client: Client, harvest: string, options: { waitMs?: number } = {}): Promise<TriggerResult> {
  const handle = client.schedule.getHandle(scheduleIdOf(harvest));
  const before = await handle.describe();
  // Without a policy, a trigger overlaps whatever runs; the schedule's own must be passed.
  const overlap = before.policies.overlap ?? ScheduleOverlapPolicy.SKIP;
  await handle.trigger(overlap);
  const deadline = Date.now() + (options.waitMs ?? 10_000);
  for (;;) {
    const now = await handle.describe();
    if (now.info.numActionsTaken > before.info.numActionsTaken) {
      const newest = now.info.recentActions.at(-1);
      if (newest) return { outcome: 'started', workflowId: newest.action.workflow.workflowId };
    }
    if (now.info.numActionsSkippedOverlap > before.info.numActionsSkippedOverlap) {
      return { outcome: 'skipped', running: now.info.runningActions.map((run) => run.workflow.workflowId), overlap };
    }
    if (Date.now() > deadline) return { outcome: 'requested' };
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
