/**
 * The data directory's mark of the lake's last maintenance: a file whose modification time is
 * that time (its text says it for people), so `ls -l` and `touch` read and set it.
 */
import { statSync, utimesSync } from 'node:fs';
import { writeDurableFile } from './durable-file.js';
import { maintenanceMarkFile } from './layout.js';

export function lakeMaintainedAt(dataDir: string): number | undefined {
  try {
    return statSync(maintenanceMarkFile(dataDir)).mtimeMs;
  } catch {
    return undefined;
  }
}

export function markLakeMaintained(dataDir: string, atMs: number): void {
  const file = maintenanceMarkFile(dataDir);
  const at = new Date(atMs);
  // Written durably: a mark lost to a power loss only maintains the lake again, but a mark whose
  // maintenance a power loss took back would skip a day's; the maintenance's commits are durable
  // when it returns (src/warehouse/lake-sync.ts), so the mark after them is never ahead of them.
  writeDurableFile(file, `${at.toISOString()}\n`, { what: 'maintenance mark' });
  utimesSync(file, at, at);
}
