/**
 * The chaos soak's faults (bench/chaos-soak.mjs): what each does to the stack, and the small disk
 * a run that draws `disk-full` keeps its data directory on.
 *
 *   worker-kill       SIGKILL of a worker, replaced by a new one (a new machine when distributed)
 *   worker-freeze     SIGSTOP of a worker for 5-20 s, then SIGCONT
 *   temporal-restart  the Temporal dev server stopped and started again on its port and SQLite file
 *   api-5xx           the emulator answers 30 % of calls with 5xx for 5-15 s
 *   answers-cut       the proxy cuts the body of every 3rd content answer (after the emulator charged
 *                     it), 2-6 answers: the client sends the call again, the lost attempt counted
 *   answers-corrupt   the proxy spoils 1-3 answers so the client must refuse them: a list page with
 *                     more items than asked (oversize) or an item with an empty id, or stats about
 *                     another item; the run cannot complete, and a retry (the proxy passing answers
 *                     through again) completes it
 *   disk-full         (one machine) the data directory, a 64 MiB tmpfs in a private mount namespace,
 *                     filled by another file: the run fails; the file is removed and a retry
 *                     completes it
 *   postgres-outage   (distributed) PostgreSQL stopped for 10-40 s, then started again in place
 *   minio-freeze      (distributed) MinIO SIGSTOPped for 10-40 s, then SIGCONT
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, statfsSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { track, waitFor } from './stack.mjs';
import { mountPrivateTmpfs } from '../private-tmpfs.mjs';

export const LOCAL_FAULTS = ['worker-kill', 'worker-freeze', 'temporal-restart', 'api-5xx', 'answers-cut', 'answers-corrupt', 'disk-full'];
export const DISTRIBUTED_FAULTS = [...LOCAL_FAULTS.filter((kind) => kind !== 'disk-full'), 'postgres-outage', 'minio-freeze'];
/** Faults whose calls in flight may be lost (an attempt cut off mid-call): each may re-pay up to the calls in flight. */
export const IN_FLIGHT_FAULTS = new Set(['worker-kill', 'worker-freeze', 'temporal-restart', 'postgres-outage', 'minio-freeze', 'disk-full']);
/** Spoiled answers the client must refuse: the run cannot complete with them. */
export const REFUSED_KINDS = ['oversize', 'empty_id', 'other_entity'];
const DISK_KIB = 64 * 1024;

const LIST_ENDPOINT = /\/channel-(videos|reels)$/;

/**
 * How the proxy spoils a call: cut its body, or (`refuse`) spoil it as a list page (`listKind`:
 * oversize or an empty id) or a stats answer (about another item) must not be taken; undefined
 * for a call no such spoiling fits.
 */
function spoilingOf(mode, listKind, call) {
  if (mode === 'cut') return { kind: 'cut_body', fraction: 0.5 };
  if (LIST_ENDPOINT.test(call.endpoint)) return { kind: listKind };
  if (call.endpoint.endsWith('/stats')) return { kind: 'other_entity' };
  return undefined;
}

/**
 * Spoils `count` content answers (one in `every` of those a spoiling fits), then lets answers
 * through; resolves once they are spoiled, the run has ended, or 30 s have passed. An answer chosen
 * before the end may still be spoiled after it: the run's count is taken from the proxy afterwards.
 */
async function spoil(ctx, fault, mode, count, every) {
  const { proxy } = ctx.stack;
  const before = proxy.spoiledCalls.length;
  const listKind = fault.seconds % 2 === 0 ? 'oversize' : 'empty_id';
  let fitting = 0;
  proxy.setChoice((call) => {
    const spoiling = spoilingOf(mode, listKind, call);
    return spoiling && ++fitting % every === 0 ? spoiling : undefined;
  });
  await waitFor(() => ctx.done() || proxy.spoiledCalls.length - before >= count, 30_000, `${count} answers spoiled`, 50).catch(() => undefined);
  proxy.passThrough();
  fault.spoiled = proxy.spoiledCalls.length - before;
}

/** Makes one fault, now; resolves once the service is back. `workers` is changed in place (a killed one is replaced). */
export async function makeFault(ctx, run, fault, workers) {
  const victim = Math.floor(fault.victim * workers.length);
  const { stack, services } = ctx;
  switch (fault.kind) {
    case 'worker-kill':
      workers[victim].kill('SIGKILL');
      await workers[victim].exited;
      workers[victim] = ctx.startWorker(run);
      return;
    case 'worker-freeze':
      workers[victim].kill('SIGSTOP');
      await sleep(Math.min(fault.seconds, 20) * 1_000);
      workers[victim].kill('SIGCONT');
      return;
    case 'temporal-restart':
      await stack.stopTemporal();
      await sleep(2_000);
      await stack.startTemporal();
      return;
    case 'api-5xx':
      await stack.admin('faults', { fault_rate: 0.3 });
      await sleep(Math.min(fault.seconds, 15) * 1_000);
      await stack.admin('faults', { fault_rate: 0 });
      return;
    case 'answers-cut':
      return spoil(ctx, fault, 'cut', 2 + (fault.seconds % 5), 3);
    case 'answers-corrupt':
      return spoil(ctx, fault, 'refuse', 1 + (fault.seconds % 3), 2);
    case 'disk-full':
      return fillDisk(run);
    case 'postgres-outage':
      await services().postgres.stop();
      await sleep((10 + fault.seconds) * 1_000);
      await services().postgres.start();
      return;
    case 'minio-freeze': {
      const pid = services().minio.pid();
      process.kill(pid, 'SIGSTOP');
      await sleep((10 + fault.seconds) * 1_000);
      process.kill(pid, 'SIGCONT');
      return;
    }
    default:
      throw new Error(`no fault ${fault.kind}`);
  }
}

// -------------------------------------------------------------------------------------------------
// The small disk: the data directory as a tmpfs in a private mount namespace (`unshare --mount
// --propagation private`: the host's mounts are untouched), held by a process that sleeps; the
// worker and `harvester retry` enter it with `nsenter -m`, and the soak reads the files through
// /proc/<holder>/root, as bench/fault-matrix.mjs does.

export async function mountDisk(run) {
  run.holder = await mountPrivateTmpfs(run.dataDir, DISK_KIB, track);
}

/** A harvester command in the run's mount namespace when it has one: [file, args]. */
export function commandOf(run, args) {
  return run.holder ? ['nsenter', ['-t', String(run.holder.pid), '-m', '--', process.execPath, ...args]] : [process.execPath, args];
}

/** Where this process reads the run's data directory. */
export function readDirOf(run) {
  return run.holder ? `/proc/${run.holder.pid}/root${run.dataDir}` : run.dataDir;
}

/**
 * Fills the tmpfs with another file (fallocate: no page written), leaving it a few KiB; the
 * workers write as it is taken, so a try that asked for more than was left asks again for less.
 */
function fillDisk(run) {
  const filler = join(run.dataDir, 'filler');
  for (let margin = 16 * 1024; ; margin *= 4) {
    const fs = statfsSync(readDirOf(run));
    try {
      execFileSync('nsenter', ['-t', String(run.holder.pid), '-m', '--', 'fallocate', '-l', String(Math.max(4096, fs.bavail * fs.bsize - margin)), filler], { stdio: 'ignore' });
      break;
    } catch (error) {
      if (margin > 4 * 1024 * 1024) throw error;
    }
  }
  run.beforeRetry.push(() => execFileSync('nsenter', ['-t', String(run.holder.pid), '-m', '--', 'rm', '-f', filler]));
}

/**
 * The run's lake where DuckDB can read it: a copy when it is on the tmpfs (DuckDB resolves
 * /proc/<pid>/root/… to the host's path, where the tmpfs is not).
 */
export function readableLake(run, dir) {
  if (!run.holder) return run.dataDir;
  const copy = join(dir, 'warehouse-copy');
  mkdirSync(copy, { recursive: true });
  cpSync(join(readDirOf(run), 'lake'), join(copy, 'lake'), { recursive: true });
  return copy;
}

export async function unmountDisk(run) {
  if (!run.holder) return;
  run.holder.kill('SIGKILL');
  await run.holder.exited;
}
