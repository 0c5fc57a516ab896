#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import { demoCommand } from './commands/demo.js';
import { emulatorCommand } from './commands/emulator.js';

const program = new Command('harvester')
  .description('social-harvester: scheduled, budgeted harvests from the Social Content Data API into DuckDB and Parquet')
  .showHelpAfterError()
  .exitOverride()
  .addCommand(demoCommand())
  .addCommand(emulatorCommand());

try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) process.exit(error.exitCode);
  // Expected failures (bad config, API errors) print their message only; no stack trace.
  process.stderr.write(`harvester: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
