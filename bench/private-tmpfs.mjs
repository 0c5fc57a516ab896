/**
 * What the fault matrix and the chaos soak share to fill a disk without touching the host: a tmpfs
 * of `kib` KiB mounted over `dir` in a private mount namespace (`unshare --mount --propagation
 * private`; the host's mounts are untouched), held by a process that sleeps; the processes that
 * must see it enter with `nsenter -m`, and its files are read through /proc/<holder>/root. And the
 * polling wait both use.
 */
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';

/** Polls `check` until it gives a value other than undefined or false; throws naming `what` after `timeoutMs`. */
export async function waitFor(check, timeoutMs, what, everyMs = 200) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** Mounts the tmpfs and resolves with its holder process (`track` registers it for clean-up; it must give the child an `exited` promise). */
export async function mountPrivateTmpfs(dir, kib, track) {
  const holder = track(spawn('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', 'mount -t tmpfs -o "size=$1k" tmpfs "$2" && echo mounted && exec sleep 86400', 'sh', String(kib), dir], { stdio: ['ignore', 'pipe', 'pipe'] }));
  let output = '';
  holder.stdout.on('data', (chunk) => (output += chunk));
  holder.stderr.on('data', (chunk) => (output += chunk));
  await Promise.race([
    waitFor(() => /mounted/.test(output), 10_000, 'the tmpfs to be mounted', 20),
    holder.exited.then(({ code }) => {
      throw new Error(`unshare --mount could not mount a tmpfs (exit ${code}): ${output.trim()}`);
    }),
  ]);
  return holder;
}
