/**
 * The resident memory of a process and every process under it (a standing worker and its load
 * process), sampled from /proc while something runs: issue 40's "the standing worker's tree peaks
 * under 400 MiB". Linux only; a sample of a process that ended meanwhile is skipped.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** Each live process's parent, from /proc/<pid>/stat (fields after the command's last ')'). */
function parents() {
  const found = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      found.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

/** Bytes resident in `root` and its descendants now. */
export function treeRssBytes(root) {
  const byParent = parents();
  const tree = [root];
  for (let index = 0; index < tree.length; index++) for (const [pid, parent] of byParent) if (parent === tree[index]) tree.push(pid);
  let total = 0;
  for (const pid of tree) {
    try {
      const kib = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
      total += Number(kib ?? 0) * 1024;
    } catch {
      // Gone meanwhile.
    }
  }
  return total;
}

/** Samples the tree's resident memory every `everyMs` until stopped; `stop()` returns the peak in bytes. */
export function sampleTreeRss(root, everyMs = 50) {
  let peak = treeRssBytes(root);
  const timer = setInterval(() => (peak = Math.max(peak, treeRssBytes(root))), everyMs);
  return { stop: () => (clearInterval(timer), Math.max(peak, treeRssBytes(root))) };
}
