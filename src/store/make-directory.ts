import { mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * `mkdir -p`, level by level. Node's own `mkdirSync(path, { recursive: true })` never returns on
 * some paths: under /proc, where every mkdir answers ENOENT, it loops for good at full CPU (seen
 * with HARVESTER_DATA_DIR=/proc/nope). Here each missing level is made once, and a level that
 * cannot be made throws, naming it.
 */
export function makeDirectory(path: string): void {
  try {
    mkdirSync(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' && statSync(path).isDirectory()) return;
    const parent = dirname(path);
    if (code !== 'ENOENT' || parent === path) throw error;
    makeDirectory(parent);
    // The parent is there now: this level's own failure, if any, is final.
    try {
      mkdirSync(path);
    } catch (again) {
      if ((again as NodeJS.ErrnoException).code === 'EEXIST' && statSync(path).isDirectory()) return;
      throw again;
    }
  }
}
