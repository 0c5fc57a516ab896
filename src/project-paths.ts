import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The project root, found by walking up from this module to the nearest package.json, so the
 * same code works from src/ (tests) and from dist/src/ (the built CLI).
 */
function findProjectRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`social-harvester: no package.json above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
  return dir;
}

export const PROJECT_ROOT = findProjectRoot();
export const CONFIG_DIR = join(PROJECT_ROOT, 'config');
export const TOOLS_DIR = join(PROJECT_ROOT, '.tools');
