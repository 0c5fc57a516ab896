import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../src/project-paths.js';

export const CLI = join(PROJECT_ROOT, 'dist', 'src', 'cli', 'main.js');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the built `harvester` CLI as a user would, in its own process. */
export function runCli(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  return runCliUnder([], args, env);
}

/**
 * Runs the built CLI under another program given as `wrapper` (its command and arguments, which
 * end where node's command line begins: `strace … -o trace`), or alone when it is empty.
 */
export function runCliUnder(wrapper: string[], args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  const [command, ...commandArgs] = [...wrapper, process.execPath, CLI, ...args];
  return new Promise((resolve, reject) => {
    const child = spawn(command!, commandArgs, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}
