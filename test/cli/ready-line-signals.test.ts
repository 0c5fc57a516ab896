/**
 * The services a script starts and stops, `harvester emulator` and `harvester receiver`, listen for
 * SIGINT and SIGTERM before the line that says they serve: a script that sends SIGTERM the moment it
 * reads that line stops them cleanly (exit 0). They wrote it first, so a SIGTERM in between met
 * Node's default and killed them outright. A recorder preloaded into each (test/support/preload.ts)
 * notes their listeners as the line is written.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI } from '../support/cli.js';
import { waitFor } from '../support/emulator.js';
import { listenersWhenWriting, preloadRecorder } from '../support/preload.js';

const dir = mkdtempSync(join(tmpdir(), 'ready-line-signals-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Starts `args` with the recorder, SIGTERMs it as soon as its ready line is read; resolves with its exit and the listeners it had as it wrote the line. */
async function stoppedOnReadyLine(name: string, args: string[], env: Record<string, string>) {
  const recorder = preloadRecorder(dir, name, listenersWhenWriting('Ctrl-C stops it'));
  const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env, ...recorder.env }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  try {
    await waitFor(() => (stderr.includes('Ctrl-C stops it') ? true : child.exitCode === null ? undefined : `exited: ${stderr}`), 60_000, `${name} to say it serves`);
    child.kill('SIGTERM');
    return { exit: await exited, listeners: recorder.recorded(), stderr };
  } finally {
    child.kill('SIGKILL');
  }
}

describe('a service stopped as soon as it says it serves', () => {
  it('harvester emulator listens before it says so, and exits 0', async () => {
    const emulator = await stoppedOnReadyLine('emulator', ['emulator', '--port', '0'], {});
    expect(emulator.listeners).toEqual(['SIGINT listeners 1, SIGTERM listeners 1']);
    expect(emulator.exit, emulator.stderr).toEqual({ code: 0, signal: null });
  });

  it('harvester receiver listens before it says so, and exits 0', async () => {
    const receiver = await stoppedOnReadyLine('receiver', ['receiver', '--port', '0', '--no-temporal'], { HARVESTER_DATA_DIR: join(dir, 'receiver-data'), SOCIAL_WEBHOOK_SECRETS: 'whsec_ready_line_test' });
    expect(receiver.listeners).toEqual(['SIGINT listeners 1, SIGTERM listeners 1']);
    expect(receiver.exit, receiver.stderr).toEqual({ code: 0, signal: null });
  });
});
