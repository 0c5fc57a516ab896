/**
 * The benchmarks' emulator: `harvester emulator` (built, in dist/) as a child process on a free
 * loopback port, its base URL read from the line it prints. One process apart from the load
 * generator, so the two do not share an event loop.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));

/** Starts the emulator with extra arguments; resolves with `{ child, baseUrl, origin }`. */
export function startEmulatorProcess(args, { timeoutMs = 20_000 } = {}) {
  const child = spawn(process.execPath, [CLI, 'emulator', '--host', '127.0.0.1', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk) => {
    stderr += chunk;
  });
  return new Promise((resolve, reject) => {
    let stdout = '';
    const timer = setTimeout(() => reject(new Error(`the emulator did not print SOCIAL_API_BASE_URL within ${timeoutMs / 1000} s; stderr: ${stderr}`)), timeoutMs);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the emulator exited early (code ${code}, signal ${signal}); stderr: ${stderr}`));
    });
    child.stdout.setEncoding('utf8').on('data', (chunk) => {
      stdout += chunk;
      const match = /^SOCIAL_API_BASE_URL=(\S+)$/m.exec(stdout);
      if (!match) return;
      clearTimeout(timer);
      resolve({ child, baseUrl: match[1], origin: new URL(match[1]).origin });
    });
  });
}
