/**
 * The data directory's mark of the lake's last maintenance: a file whose modification time is
 * that time (its text says it for people), so `ls -l` and `touch` read and set it.
 */
import { statSync, utimesSync, writeFileSync } from 'node:fs';
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
  writeFileSync(file, `${at.toISOString()}\n`);
  utimesSync(file, at, at);
}
