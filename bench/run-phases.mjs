/**
 * Where a run's fixed cost goes (issue 40), read from what the run leaves behind rather than from
 * instruments of its own: the phases from its Temporal history's event times beside the command's
 * own start and exit, and the final load's steps from `finishRun`'s result in that history (the
 * activity's and the load process's step times, src/warehouse/step-times.ts). A tree older than the
 * step times gives the phases only.
 *
 * Also the comparison between two commits: `BENCH_STEPS_OUT=<file>` keeps this run's medians,
 * `BENCH_STEPS_BEFORE=<file>` (another commit's) marks each phase or step that grew by more than
 * 20% (and by at least 5 ms, below which a step is noise on a busy machine).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { median } from './stats.mjs';

const ms = (time) => (time ? Number(time.seconds ?? 0) * 1000 + Math.round((time.nanos ?? 0) / 1e6) : undefined);

/** Every event of a workflow over all its runs, oldest run first (continue-as-new walked back from the latest). */
export async function allEvents(client, workflowId) {
  let { runId } = await client.workflow.getHandle(workflowId).describe();
  const runs = [];
  while (runId) {
    const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    runs.unshift(history.events);
    runId = history.events[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
  }
  return runs.flat();
}

/** The result of a completed activity event, as JSON (the default payload converter's json/plain). */
function resultOf(event) {
  const payload = event.activityTaskCompletedEventAttributes?.result?.payloads?.[0];
  if (!payload?.data) return undefined;
  try {
    return JSON.parse(Buffer.from(payload.data).toString('utf8'));
  } catch {
    return undefined;
  }
}

/**
 * A run's phases in milliseconds, from its history's `events` (allEvents; spawned and exited: the
 * command's, in this clock's epoch ms) and its final load's steps, `final load: <step>`. The
 * history's times are the dev server's, on this machine.
 */
export function runPhases(events, { spawnedAt, exitedAt }) {
  const at = (event) => ms(event.eventTime);
  const started = events.find((e) => e.workflowExecutionStartedEventAttributes);
  const firstTask = events.find((e) => e.workflowTaskCompletedEventAttributes);
  const scheduled = (name) => events.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === name);
  const completedOf = (event) => event && events.find((e) => e.activityTaskCompletedEventAttributes && Number(e.activityTaskCompletedEventAttributes.scheduledEventId) === Number(event.eventId));
  const prepare = scheduled('prepareRun');
  const prepared = completedOf(prepare);
  const finish = events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'finishRun').at(-1);
  const finished = completedOf(finish);
  const closed = events.at(-1);
  // The work between them, split: how long the first piece of work waited to start, the span of the
  // work itself (first start to last completion), and what came after the last piece before the final load.
  const workStarts = events.filter((e) => e.activityTaskStartedEventAttributes && !['prepareRun', 'finishRun'].includes(activityName(events, e.activityTaskStartedEventAttributes.scheduledEventId)));
  const workEnds = events.filter((e) => e.activityTaskCompletedEventAttributes && !['prepareRun', 'finishRun'].includes(activityName(events, e.activityTaskCompletedEventAttributes.scheduledEventId)));
  const firstWork = workStarts.length > 0 ? Math.min(...workStarts.map(at)) : undefined;
  const lastWork = workEnds.length > 0 ? Math.max(...workEnds.map(at)) : undefined;
  const phases = {
    'start: process to workflow start': at(started) - spawnedAt,
    'first workflow task': at(firstTask) - at(started),
    'prepareRun': prepared ? at(prepared) - at(prepare) : undefined,
    'the work (prepared to final load)': finish && prepared ? at(finish) - at(prepared) : undefined,
    'work: prepared to first work started': prepared && firstWork !== undefined ? firstWork - at(prepared) : undefined,
    'work: first work started to last completed': firstWork !== undefined && lastWork !== undefined ? lastWork - firstWork : undefined,
    'work: last completed to final load': finish && lastWork !== undefined ? at(finish) - lastWork : undefined,
    'final load (finishRun)': finished ? at(finished) - at(finish) : undefined,
    'final load to workflow closed': finished ? at(closed) - at(finished) : undefined,
    'workflow closed to process exit': exitedAt - at(closed),
  };
  const steps = finished ? resultOf(finished)?.steps ?? {} : {};
  for (const [step, value] of Object.entries(steps)) phases[`final load: ${step}`] = value;
  return Object.fromEntries(Object.entries(phases).filter(([, value]) => typeof value === 'number' && Number.isFinite(value)));
}

/** The activity type of the activity scheduled by event `scheduledEventId`. */
function activityName(events, scheduledEventId) {
  return events.find((e) => Number(e.eventId) === Number(scheduledEventId))?.activityTaskScheduledEventAttributes?.activityType?.name;
}

/** Each phase's median over the runs that have it, in the order first seen. */
export function medianPhases(runs) {
  const names = [...new Set(runs.flatMap((run) => Object.keys(run ?? {})))];
  return Object.fromEntries(names.map((name) => [name, median(runs.filter((run) => run?.[name] !== undefined).map((run) => run[name]))]));
}

const before = process.env.BENCH_STEPS_BEFORE && existsSync(process.env.BENCH_STEPS_BEFORE) ? JSON.parse(readFileSync(process.env.BENCH_STEPS_BEFORE, 'utf8')) : undefined;
const kept = {};

/**
 * A markdown table of a case's phases for each harvester contender, with the other commit's
 * medians beside them when BENCH_STEPS_BEFORE names them, and the growth marked.
 */
export function phaseTable(caseName, byContender) {
  const lines = [];
  const contenders = Object.keys(byContender);
  const names = [...new Set(contenders.flatMap((c) => Object.keys(byContender[c])))];
  const header = contenders.flatMap((c) => (before ? [`${c} before`, `${c} now`] : [c]));
  lines.push(`| phase or step, ms (median) | ${header.join(' | ')} |`, `|---|${header.map(() => '---|').join('')}`);
  for (const name of names) {
    const cells = contenders.flatMap((c) => {
      const now = byContender[c][name];
      const was = before?.[caseName]?.[c]?.[name];
      const shown = now === undefined ? '—' : now.toFixed(0);
      if (!before) return [shown];
      const grew = now !== undefined && was !== undefined && now > was * 1.2 && now - was >= 5;
      return [was === undefined ? '—' : was.toFixed(0), grew ? `**${shown} (+${Math.round((now / was - 1) * 100)}%)**` : shown];
    });
    lines.push(`| ${name} | ${cells.join(' | ')} |`);
  }
  kept[caseName] = byContender;
  return lines.join('\n');
}

/** Writes the medians of every case shown, for a later run's BENCH_STEPS_BEFORE. */
export function keepPhases() {
  if (process.env.BENCH_STEPS_OUT) writeFileSync(process.env.BENCH_STEPS_OUT, `${JSON.stringify(kept, null, 1)}\n`);
}
