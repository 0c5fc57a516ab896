/**
 * A recorder preloaded into a CLI process under test (NODE_OPTIONS=--import): a few lines of
 * JavaScript run inside the process before the CLI, to note what it does from within (threads it
 * starts, listeners it has when it writes a line), appending to a log file the test then reads.
 * The lines see `appendFileSync`, `require` (for Node's CommonJS modules, whose exports they may
 * wrap) and `log`, the log file's path.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

export interface Preload {
  /** The environment that preloads it into a process. */
  env: { NODE_OPTIONS: string };
  /** What it recorded so far, a line each. */
  recorded(): string[];
}

/** Writes a recorder of `lines` into `dir` (its name unique there by `name`), logging to `<name>.log`. */
export function preloadRecorder(dir: string, name: string, lines: string[]): Preload {
  const file = join(dir, `${name}.mjs`);
  const log = join(dir, `${name}.log`);
  writeFileSync(
    file,
    [
      "import { appendFileSync } from 'node:fs';",
      "import { createRequire } from 'node:module';",
      'const require = createRequire(import.meta.url);',
      `const log = ${JSON.stringify(log)};`,
      ...lines,
      '',
    ].join('\n'),
  );
  return {
    env: { NODE_OPTIONS: `--import ${pathToFileURL(file).href}` },
    recorded: () => (existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : []),
  };
}

/**
 * Recorder lines that note, as the process writes a chunk holding `text` to stderr (fd 2, by
 * process.stderr or by fs.write/writeSync, as pino's destination does), how many SIGINT and SIGTERM
 * listeners it has: a line a script reads before stopping the process must come after them.
 */
export function listenersWhenWriting(text: string): string[] {
  const note = `if (String(data).includes(${JSON.stringify(text)})) appendFileSync(log, 'SIGINT listeners ' + process.listenerCount('SIGINT') + ', SIGTERM listeners ' + process.listenerCount('SIGTERM') + '\\n');`;
  return [
    "const fs = require('node:fs');",
    // A chunk process.stderr hands on to fs.writeSync (when stderr is a file) is noted once, by the stream.
    'let inStderrWrite = false;',
    `for (const name of ['write', 'writeSync']) { const original = fs[name]; fs[name] = function (fd, data, ...rest) { if (fd === 2 && !inStderrWrite) { ${note} } return original.call(this, fd, data, ...rest); }; }`,
    `const stderrWrite = process.stderr.write; process.stderr.write = function (data, ...rest) { ${note} inStderrWrite = true; try { return stderrWrite.call(this, data, ...rest); } finally { inStderrWrite = false; } };`,
  ];
}
