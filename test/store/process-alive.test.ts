/**
 * The one check of whether a process exists (src/store/process-alive.ts), as the dev server's
 * record, a stray temporary's writer and `harvester dev`'s shared services use it.
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { isProcessAlive } from '../../src/store/process-alive.js';
import { built } from '../support/limited-child.js';

/** An unprivileged user's id: `nobody` on Linux. */
const NOBODY = 65534;

describe('isProcessAlive', () => {
  it('says this process is alive', () => {
    expect(isProcessAlive(process.pid)).toBe(true);
  });

  it('says a process that has exited is not', async () => {
    const child = spawn(process.execPath, ['-e', '']);
    const pid = child.pid!;
    await once(child, 'exit');
    expect(isProcessAlive(pid)).toBe(false);
  });

  it('says no pid, or one that names no single process (0 and -1 are process groups), is not alive', () => {
    for (const pid of [undefined, 0, -1, Number.NaN, 1.5]) expect(isProcessAlive(pid)).toBe(false);
  });

  it("says another user's process is alive: signal 0 fails with EPERM because the process exists", () => {
    // Asked as an unprivileged user (a child run as `nobody` when the tests run as root) about
    // pid 1, which is root's: the kernel answers EPERM. The built module is what the child imports.
    const script = `import { isProcessAlive } from ${built('src/store/process-alive')};
let code = 'none';
try { process.kill(1, 0); } catch (error) { code = error.code; }
console.log(JSON.stringify({ code, alive: isProcessAlive(1) }));`;
    const asRoot = process.getuid?.() === 0;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', ...(asRoot ? { uid: NOBODY, gid: NOBODY } : {}) });
    expect(child.status, child.stderr).toBe(0);
    const answer = JSON.parse(child.stdout.trim()) as { code: string; alive: boolean };
    expect(answer.code, 'signal 0 to pid 1 from an unprivileged user fails with EPERM').toBe('EPERM');
    expect(answer.alive).toBe(true);
  });
});
