#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import nodeModule from 'node:module';
import { join } from 'node:path';
import { Command, CommanderError } from 'commander';
import { SocialApiError } from '../api/errors.js';
import { PROJECT_ROOT } from '../project-paths.js';

// Node 22.1 and later keep V8's compiled code of the modules a command loads on disk, and reuse it
// at the next start: `harvester run` reached its first API call about 0.1 s sooner on Node 24.
// Node 20 has no such cache; there the call is absent and this does nothing.
(nodeModule as { enableCompileCache?: () => unknown }).enableCompileCache?.();

/**
 * The commands, in the order help lists them, each loaded only when needed: importing all of them
 * (Temporal's worker, DuckDB, the report, the emulator) took over a second of every start.
 */
const COMMANDS: Record<string, () => Promise<Command>> = {
  demo: async () => (await import('./commands/demo.js')).demoCommand(),
  dev: async () => (await import('./commands/dev.js')).devCommand(),
  call: async () => (await import('./commands/call.js')).callCommand(),
  emulator: async () => (await import('./commands/emulator.js')).emulatorCommand(),
  export: async () => (await import('./commands/warehouse.js')).exportCommand(),
  load: async () => (await import('./commands/warehouse.js')).loadCommand(),
  maintain: async () => (await import('./commands/warehouse.js')).maintainCommand(),
  rebuild: async () => (await import('./commands/warehouse.js')).rebuildCommand(),
  query: async () => (await import('./commands/warehouse.js')).queryCommand(),
  plan: async () => (await import('./commands/plan.js')).planCommand(),
  budgets: async () => (await import('./commands/budgets.js')).budgetsCommand(),
  receiver: async () => (await import('./commands/receiver.js')).receiverCommand(),
  replay: async () => (await import('./commands/replay.js')).replayCommand(),
  report: async () => (await import('./commands/report.js')).reportCommand(),
  retry: async () => (await import('./commands/retry.js')).retryCommand(),
  run: async () => (await import('./commands/run.js')).runCommand(),
  runs: async () => (await import('./commands/runs.js')).runsCommand(),
  schedules: async () => (await import('./commands/schedules.js')).schedulesCommand(),
  show: async () => (await import('./commands/show.js')).showCommand(),
  sql: async () => (await import('./commands/sql.js')).sqlCommand(),
  temporal: async () => (await import('./commands/temporal.js')).temporalCommand(),
  webhooks: async () => (await import('./commands/webhooks.js')).webhooksCommand(),
  worker: async () => (await import('./commands/worker.js')).workerCommand(),
};

const VERSION_FLAGS = ['-V', '--version'];

/** The version of the installed package, from its package.json. */
function packageVersion(): string {
  return (JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
}

try {
  const program = new Command('harvester')
    .description('social-harvester: scheduled, budgeted harvests from the Social Content Data API into DuckDB and Parquet')
    .version(packageVersion(), VERSION_FLAGS.join(', '), 'print the version')
    .showHelpAfterError()
    .exitOverride();
  // A known command loads alone, the version none; help, a typo or no command at all need every command's name.
  const named = process.argv[2];
  const wanted = named !== undefined && Object.hasOwn(COMMANDS, named) ? [named] : VERSION_FLAGS.includes(named ?? '') ? [] : Object.keys(COMMANDS);
  for (const name of wanted) program.addCommand(await COMMANDS[name]!());
  await program.parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) process.exit(error.exitCode);
  // Expected failures print their message only, no stack trace. Exit codes: 1 for bad arguments,
  // configuration or environment; 2 for an error answered by the API (or failing to reach it).
  process.stderr.write(`harvester: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(error instanceof SocialApiError ? 2 : 1);
}
