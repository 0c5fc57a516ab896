import { execFile, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { TOOLS_DIR } from '../../src/config/project-paths.js';

export interface PythonResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

const PYTHON_ENV = { ...process.env, PYTHONPATH: join(TOOLS_DIR, 'python') };
const TIMEOUT_MS = 120_000;

/** Runs a Python script with the clients setup installs (duckdb, pyarrow, standardwebhooks). */
export function runPython(script: string, args: string[] = []): PythonResult {
  const result = spawnSync('python3', ['-c', script, ...args], { encoding: 'utf8', env: PYTHON_ENV, timeout: TIMEOUT_MS });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** The same, without blocking this process: for a script that talks to a server this process runs. */
export function runPythonAsync(script: string, args: string[] = []): Promise<PythonResult> {
  return new Promise((resolve) => {
    execFile('python3', ['-c', script, ...args], { encoding: 'utf8', env: PYTHON_ENV, timeout: TIMEOUT_MS, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr });
    });
  });
}
