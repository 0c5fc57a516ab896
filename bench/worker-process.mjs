/**
 * The benchmarks' standing worker: `harvester worker` (built, in dist/) as a child process with the
 * heap flags the README gives long-lived workers, resolved once it says it is polling. Benchmarks
 * start it before their timed rounds, as a deployed worker runs before anyone's `harvester run`.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));
const { WORKER_NODE_FLAGS } = await import(new URL('../dist/src/cli/stack.js', import.meta.url).href);

/** Starts `harvester worker` under `node` with `env`; resolves with the child once it polls. */
export function startWorkerProcess({ node = process.execPath, env, cwd, timeoutMs = 30_000 }) {
  const child = spawn(node, [...WORKER_NODE_FLAGS, CLI, 'worker'], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`harvester worker did not start polling within ${timeoutMs / 1000} s: ${output}`)), timeoutMs);
    const onData = (chunk) => {
      output += chunk;
      if (!output.includes('polling task queue')) return;
      clearTimeout(timer);
      resolve(child);
    };
    child.stdout.setEncoding('utf8').on('data', onData);
    child.stderr.setEncoding('utf8').on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`harvester worker exited ${code}: ${output}`));
    });
  });
}
