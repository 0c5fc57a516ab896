/**
 * Whether a process exists, by its pid: the one check the data directory's users make (a stray
 * temporary's writer, the dev server that recorded its state here, a shared service of
 * `harvester dev`). Here, under src/store, because the store is the lowest room all three import.
 */

/**
 * Whether process `pid` exists on this machine. Signal 0 checks without sending anything: it
 * succeeds for our own processes, fails with EPERM for another user's (it exists: alive), and with
 * ESRCH when there is none. Undefined, or a pid that is not a positive integer (0 and -1 would
 * name process groups), is not alive. A pid may be reused after its process ends; this tells only
 * that some process has it now.
 */
export function isProcessAlive(pid: number | undefined): boolean {
  if (pid === undefined || !Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
