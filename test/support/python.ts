import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { TOOLS_DIR } from '../../src/config/project-paths.js';

/** Runs a Python script with the clients setup installs (duckdb, pyarrow, standardwebhooks). */
export function runPython(script: string, args: string[] = []): { code: number | null; stdout: string; stderr: string } {
  const result = spawnSync('python3', ['-c', script, ...args], {
    encoding: 'utf8',
    env: { ...process.env, PYTHONPATH: join(TOOLS_DIR, 'python') },
    timeout: 120_000,
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}
