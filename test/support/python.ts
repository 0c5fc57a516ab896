import { execFile, spawnSync } from 'node:child_process';
import { delimiter, join } from 'node:path';
import { TOOLS_DIR } from '../../src/project-paths.js';

export interface PythonResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Every Python package the tests use, in one target that `npm run setup -- --for-tests` installs. */
export const TEST_PYTHON_DIR = join(TOOLS_DIR, 'python');

// A PYTHONPATH of the caller's own comes after the packages setup installs.
const PYTHON_ENV = { ...process.env, PYTHONPATH: [TEST_PYTHON_DIR, process.env.PYTHONPATH].filter(Boolean).join(delimiter) };
const TIMEOUT_MS = 120_000;

/** Runs a Python script with the clients setup installs (duckdb, pyarrow, standardwebhooks, prometheus_client). */
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
