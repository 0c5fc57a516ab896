import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/project-paths.js';

/**
 * The benchmarks and the fault matrix import the built modules by path and take names out of
 * them (`const { landingFile } = await import(join(dist, 'src/store/layout.js'))`). A name that
 * moved to another module is then `undefined` with no error, and a benchmark miscounts silently:
 * the fault matrix once counted a landed call as lost that way. Every such name must exist.
 */
const BUILT_IMPORT = /const \{([^}]*)\} = await import\((?:join\((\w+), '([^']+)'\)|`\$\{(\w+)\}([^`]+)`)\)/g;
/** The folders of built code a script names: `const dist = join(root, 'dist')`, `new URL('../dist/src/store/', …)`. */
const BUILT_FOLDER = /const (\w+) = (?:join\(root, '(dist)'\)|new URL\('\.\.\/(dist\/[^']*)')/g;

describe('what the benchmarks take from the built modules', () => {
  const scripts = readdirSync(join(PROJECT_ROOT, 'bench')).filter((name) => name.endsWith('.mjs'));

  it.each(scripts)('%s imports only names its modules export', async (script) => {
    const text = readFileSync(join(PROJECT_ROOT, 'bench', script), 'utf8');
    const folders = new Map([...text.matchAll(BUILT_FOLDER)].map(([, name, root, below]) => [name!, (root ?? below)!]));
    const missing: string[] = [];
    for (const [, names, joinedFolder, joinedPath, templatedFolder, templatedPath] of text.matchAll(BUILT_IMPORT)) {
      const folder = folders.get((joinedFolder ?? templatedFolder)!);
      if (folder === undefined) continue;
      const path = join(folder, (joinedPath ?? templatedPath)!);
      const module = await import(join(PROJECT_ROOT, path));
      for (const name of names!.split(',').map((part) => part.split(':')[0]!.trim()).filter(Boolean)) {
        if (!(name in module)) missing.push(`${name} from ${path}`);
      }
    }
    expect(missing).toEqual([]);
  });
});
