/**
 * Runs a Node script in a child process whose files may grow to `blocks` KiB at most
 * (RLIMIT_FSIZE, `ulimit -f`): the kernel then stores a write only up to the limit (a short write)
 * and fails the next with EFBIG, as it does on a disk that fills up. The script ignores SIGXFSZ, so
 * the write fails instead of killing it. Its modules come from `dist/` (npm run build).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../src/project-paths.js';

/** The built module of a source file, e.g. `src/store/landing` → an absolute specifier. */
export function built(module: string): string {
  return JSON.stringify(join(PROJECT_ROOT, 'dist', `${module}.js`));
}

/** Runs `body` (an ES module's code) under the file-size limit; returns what it printed as JSON on its last line. */
export function runWithFileSizeLimit<T>(blocks: number, body: string): T {
  const script = join(mkdtempSync(join(tmpdir(), 'limited-')), 'child.mjs');
  writeFileSync(script, `process.on('SIGXFSZ', () => {});\n${body}`);
  const child = spawnSync('bash', ['-c', `ulimit -f ${blocks} && exec "$0" "$1"`, process.execPath, script], { encoding: 'utf8' });
  if (child.status !== 0) throw new Error(`the limited child failed (status ${child.status}, signal ${child.signal}): ${child.stderr}`);
  const lines = child.stdout.trim().split('\n');
  return JSON.parse(lines[lines.length - 1]!) as T;
}
