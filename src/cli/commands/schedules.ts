import { Command } from 'commander';
import { ScheduleNotFoundError, type Client } from '@temporalio/client';
import { dataDirFromEnv } from '../../config/environment.js';
import { DEFAULT_HARVESTS_FILE, loadHarvestConfig } from '../../config/harvest-config.js';
import { connectClient } from '../../temporal/connection.js';
import { temporalSettingsFromEnv, type TemporalSettings } from '../../temporal/settings.js';
import {
  applyHarvestSchedules,
  deleteHarvestSchedule,
  describeHarvestSchedule,
  harvestOfScheduleId,
  listHarvestSchedules,
  pauseExistingHarvestSchedule,
  resumeHarvestSchedule,
  scheduleIdOf,
  triggerHarvestSchedule,
  type ApplyResult,
  type HarvestScheduleView,
} from '../../temporal/schedules.js';
import { storeFromEnvironment } from '../../store/store-from-environment.js';
import { runApiFromEnv, runStoreFromEnv, taskQueueFromEnv } from '../run-environment.js';
import { UsageError } from '../options.js';
import { textTable } from '../text-table.js';

const PAUSE_NOTE = 'paused by hand (harvester schedules pause)';
const RESUME_NOTE = 'resumed by hand (harvester schedules resume)';

async function withTemporal<T>(work: (client: Client, settings: TemporalSettings) => Promise<T>): Promise<T> {
  const settings = temporalSettingsFromEnv();
  // connectClient's error already names the address.
  const client = await connectClient(settings);
  try {
    return await work(client, settings);
  } finally {
    await client.connection.close();
  }
}

/** What the config says of a harvest's schedule; undefined when the config does not load. */
function scheduleInConfig(name: string, configFile: string): { state: 'scheduled' | 'unscheduled' | 'unknown'; file: string; names: string[] } | undefined {
  try {
    const config = loadHarvestConfig(configFile);
    const harvest = config.harvests.find((candidate) => candidate.name === name);
    const state = !harvest ? 'unknown' : harvest.schedule ? 'scheduled' : 'unscheduled';
    return { state, file: config.file, names: config.harvests.map((known) => known.name) };
  } catch {
    // The config only adds a hint; a config that does not load gives none.
    return undefined;
  }
}

/** The hint in the error for a harvest whose schedule Temporal does not have. */
function configHint(name: string, configFile: string): string {
  const found = scheduleInConfig(name, configFile);
  if (!found) return '';
  if (found.state === 'unknown') return `; ${found.file} has no harvest named ${JSON.stringify(name)} either (it has: ${found.names.join(', ')})`;
  if (found.state === 'unscheduled') return `; harvest ${name} has no schedule in ${found.file}`;
  return `; harvest ${name} has one in ${found.file}: run \`harvester schedules apply\` to create it`;
}

/**
 * Runs `work` on one harvest's schedule, named by the harvest or by the schedule's id as
 * `schedules list` shows it (`harvest-<name>`), turning "not found" into a message that says what
 * to do. A harvest's own name wins: `harvest-x` is first the harvest named so, then schedule
 * `harvest-x`. Gives what `work` gave and the harvest whose schedule it was.
 */
async function onSchedule<T>(name: string, configFile: string, work: (client: Client, harvest: string) => Promise<T>): Promise<{ result: T; harvest: string }> {
  return withTemporal(async (client, settings) => {
    const named = harvestOfScheduleId(name);
    for (const harvest of named === undefined ? [name] : [name, named]) {
      try {
        return { result: await work(client, harvest), harvest };
      } catch (error) {
        if (!(error instanceof ScheduleNotFoundError)) throw error;
      }
    }
    throw new UsageError(`no schedule ${scheduleIdOf(name)} on Temporal at ${settings.address} (namespace ${settings.namespace})${configHint(name, configFile)}`);
  });
}

function applyText(result: ApplyResult, settings: TemporalSettings): string {
  const rows: [string, string, string][] = [
    ...result.created.map((entry): [string, string, string] => ['created', entry.id, `${entry.cron} (${entry.timezone})`]),
    ...result.updated.map((entry): [string, string, string] => ['updated', entry.id, entry.changes.join('; ')]),
    ...result.deleted.map((entry): [string, string, string] => ['deleted', entry.id, entry.reason]),
    ...result.kept.map((entry): [string, string, string] => ['kept', entry.id, 'matches the config']),
    ...result.ignored.map((entry): [string, string, string] => ['ignored', entry.id, entry.reason]),
    ...result.failed.map((entry): [string, string, string] => ['failed', entry.id, entry.error]),
  ];
  const idWidth = Math.max(0, ...rows.map(([, id]) => id.length));
  const lines = rows.map(([what, id, detail]) => `${what.padEnd(7)}  ${id.padEnd(idWidth)}  ${detail}`);
  lines.push(
    `${result.created.length} created, ${result.updated.length} updated, ${result.deleted.length} deleted, ${result.kept.length} kept` +
      `${result.failed.length > 0 ? `, ${result.failed.length} failed` : ''} (task queue ${result.taskQueue}; Temporal ${settings.address}, namespace ${settings.namespace})`,
  );
  return lines.join('\n');
}

function listText(views: HarvestScheduleView[]): string {
  const header = ['schedule', 'cron', 'timezone', 'paused', 'note', 'next run', 'recent runs', 'task queue'];
  const rows = views.map((view) => {
    const last = view.recentRuns.at(-1);
    return [
      view.id,
      view.cron ?? '(not from apply)',
      view.timezone,
      view.paused ? 'yes' : 'no',
      view.note ?? '',
      view.nextRuns[0] ?? (view.paused ? 'none (paused)' : '-'),
      last ? `${view.recentRuns.length}, last ${last.workflowId}${view.runningWorkflows.includes(last.workflowId) ? ' (running)' : ''}` : 'none',
      view.taskQueue,
    ];
  });
  return textTable(header, rows);
}

const configOption = ['--config <file>', 'harvest config', DEFAULT_HARVESTS_FILE] as const;
const NAME_ARGUMENT = 'harvest name, or its schedule id as `schedules list` shows it (harvest-<name>)';

export function schedulesCommand(): Command {
  const command = new Command('schedules')
    .description('Temporal Schedules of the harvests: make them match the config, list, pause, resume, trigger, delete')
    .addHelpText(
      'after',
      `
A harvest with \`schedule\` in the config gets the schedule harvest-<name>: it starts harvestWorkflow
on the task queue (HARVESTER_TASK_QUEUE, default harvester) with workflow ids sched-<name>-<time>,
skips a run while the previous one is still going, and catches up on runs missed by up to an hour.
Temporal: TEMPORAL_ADDRESS (default 127.0.0.1:7233), TEMPORAL_NAMESPACE.

Examples:
  $ harvester schedules apply
  $ harvester schedules list
  $ harvester schedules pause creators-daily --reason "quota review"
  $ harvester schedules trigger creators-daily`,
    );

  command.addCommand(applySubcommand());
  command.addCommand(listSubcommand());
  command.addCommand(pauseSubcommand());
  command.addCommand(resumeSubcommand());
  command.addCommand(triggerSubcommand());
  command.addCommand(deleteSubcommand());

  return command;
}

/** `schedules apply`: the schedules made to match the config. */
function applySubcommand(): Command {
  return new Command('apply')
    .description('Create, update and delete schedules so they match the config; print what changed')
    .option(...configOption)
    .option('--json', 'print the result as JSON')
    .addHelpText(
      'after',
      `
Deletes harvest-* schedules of this task queue whose harvest is gone from the config or has no
schedule any more; schedules that start runs on another task queue are left alone. An update keeps
a schedule's paused state and note.`,
    )
    .action(async (options: { config: string; json?: boolean }) => {
      const config = loadHarvestConfig(options.config);
      await withTemporal(async (client, settings) => {
        // Scheduled runs are for the API and the store this environment names, as `harvester run`'s are.
        const store = await runStoreFromEnv();
        const result = await applyHarvestSchedules(client, config.harvests, taskQueueFromEnv(), { ...runApiFromEnv(), ...(store ? { store } : {}) });
        process.stdout.write(options.json ? `${JSON.stringify(result, null, 2)}\n` : `${applyText(result, settings)}\n`);
        if (result.failed.length > 0) {
          throw new Error(`${result.failed.length} schedule${result.failed.length === 1 ? '' : 's'} not applied: ${result.failed.map((entry) => `${entry.id}: ${entry.error}`).join('; ')}`);
        }
      });
    });
}

/** `schedules list`: every harvest schedule. */
function listSubcommand(): Command {
  return new Command('list')
    .description('Every harvest schedule: cron and time zone, paused and why, next run, recent runs')
    .option('--json', 'print the schedules as JSON')
    .action(async (options: { json?: boolean }) => {
      await withTemporal(async (client, settings) => {
        const views = await listHarvestSchedules(client);
        if (options.json) process.stdout.write(`${JSON.stringify(views, null, 2)}\n`);
        else if (views.length === 0) process.stdout.write(`no harvest schedules on Temporal at ${settings.address} (namespace ${settings.namespace}); \`harvester schedules apply\` creates them\n`);
        else process.stdout.write(`${listText(views)}\n`);
      });
    });
}

/** `schedules pause`: a harvest's schedule paused, with a note. */
function pauseSubcommand(): Command {
  return new Command('pause')
    .description("Pause a harvest's schedule; the reason is kept as its note")
    .argument('<name>', NAME_ARGUMENT)
    .option('--reason <text>', 'why (shown by `schedules list`)')
    .option(...configOption)
    .action(async (name: string, options: { reason?: string; config: string }) => {
      const note = options.reason?.trim() || PAUSE_NOTE;
      const { harvest } = await onSchedule(name, options.config, (client, harvest) => pauseExistingHarvestSchedule(client, harvest, note));
      process.stdout.write(`paused ${scheduleIdOf(harvest)}: ${note}\n`);
    });
}

/** `schedules resume`: a paused schedule resumed. */
function resumeSubcommand(): Command {
  return new Command('resume')
    .description("Resume a harvest's paused schedule")
    .argument('<name>', NAME_ARGUMENT)
    .option(...configOption)
    .action(async (name: string, options: { config: string }) => {
      const { result: wasPaused, harvest } = await onSchedule(name, options.config, (client, harvest) => resumeHarvestSchedule(client, harvest, RESUME_NOTE));
      process.stdout.write(wasPaused ? `resumed ${scheduleIdOf(harvest)}\n` : `${scheduleIdOf(harvest)} was not paused\n`);
      const store = await storeFromEnvironment(dataDirFromEnv());
      const low = await store.creditsLow().finally(() => store.close());
      if (low) process.stderr.write(`note: credits.low is in effect since ${low.since}: runs stop at once, before buying anything, until plan.changed clears it\n`);
    });
}

/** `schedules trigger`: a run started now through the schedule. */
function triggerSubcommand(): Command {
  return new Command('trigger')
    .description('Start a run of a harvest now through its schedule (a run still going means none starts: overlap SKIP)')
    .argument('<name>', NAME_ARGUMENT)
    .option(...configOption)
    .action(async (name: string, options: { config: string }) => {
      const { result, harvest } = await onSchedule(name, options.config, (client, harvest) => triggerHarvestSchedule(client, harvest));
      if (result.outcome === 'started') process.stdout.write(`started ${result.workflowId}\n`);
      else if (result.outcome === 'skipped') process.stdout.write(`skipped: ${result.running.join(', ') || 'a run'} is still going (overlap policy ${result.overlap})\n`);
      else process.stdout.write(`triggered ${scheduleIdOf(harvest)}; the scheduler has not acted yet (see \`harvester schedules list\`)\n`);
    });
}

/** `schedules delete`: a harvest's schedule deleted. */
function deleteSubcommand(): Command {
  return new Command('delete')
    .description("Delete a harvest's schedule (runs it started go on)")
    .argument('<name>', NAME_ARGUMENT)
    .option(...configOption)
    .action(async (name: string, options: { config: string }) => {
      const { harvest } = await onSchedule(name, options.config, async (client, harvest) => {
        // Described first, so "not found" is the same clear error as for the other commands.
        await describeHarvestSchedule(client, harvest);
        await deleteHarvestSchedule(client, harvest);
      });
      process.stdout.write(`deleted ${scheduleIdOf(harvest)}\n`);
      if (scheduleInConfig(harvest, options.config)?.state === 'scheduled') {
        process.stderr.write(`note: harvest ${harvest} still has a schedule in ${options.config}: the next \`harvester schedules apply\` creates it again\n`);
      }
    });
}
