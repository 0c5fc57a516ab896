#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import { SocialApiError } from '../api/errors.js';
import { callCommand } from './commands/call.js';
import { demoCommand } from './commands/demo.js';
import { devCommand } from './commands/dev.js';
import { emulatorCommand } from './commands/emulator.js';
import { planCommand } from './commands/plan.js';
import { receiverCommand } from './commands/receiver.js';
import { replayCommand } from './commands/replay.js';
import { reportCommand } from './commands/report.js';
import { retryCommand } from './commands/retry.js';
import { runCommand } from './commands/run.js';
import { runsCommand } from './commands/runs.js';
import { schedulesCommand } from './commands/schedules.js';
import { showCommand } from './commands/show.js';
import { temporalCommand } from './commands/temporal.js';
import { exportCommand, loadCommand, queryCommand } from './commands/warehouse.js';
import { webhooksCommand } from './commands/webhooks.js';
import { workerCommand } from './commands/worker.js';

const program = new Command('harvester')
  .description('social-harvester: scheduled, budgeted harvests from the Social Content Data API into DuckDB and Parquet')
  .showHelpAfterError()
  .exitOverride()
  .addCommand(demoCommand())
  .addCommand(devCommand())
  .addCommand(callCommand())
  .addCommand(emulatorCommand())
  .addCommand(exportCommand())
  .addCommand(loadCommand())
  .addCommand(queryCommand())
  .addCommand(planCommand())
  .addCommand(receiverCommand())
  .addCommand(replayCommand())
  .addCommand(reportCommand())
  .addCommand(retryCommand())
  .addCommand(runCommand())
  .addCommand(runsCommand())
  .addCommand(schedulesCommand())
  .addCommand(showCommand())
  .addCommand(temporalCommand())
  .addCommand(webhooksCommand())
  .addCommand(workerCommand());

try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) process.exit(error.exitCode);
  // Expected failures print their message only, no stack trace. Exit codes: 1 for bad arguments,
  // configuration or environment; 2 for an error answered by the API (or failing to reach it).
  process.stderr.write(`harvester: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(error instanceof SocialApiError ? 2 : 1);
}
