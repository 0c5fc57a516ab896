/**
 * A data directory's identity: made once, by whichever process asks first, read the same by every
 * other, through any path to the directory; a directory with no id is read as none when only read.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/project-paths.js';
import { storeIdFile } from '../../src/store/layout.js';
import { LocalStore } from '../../src/store/store.js';
import { dataDirectoryIdentity } from '../../src/store/store-identity.js';

const root = mkdtempSync(join(tmpdir(), 'store-identity-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** The identity as another process makes it: the built module, in a child of its own. */
function identityInAnotherProcess(dataDir: string): Promise<string> {
  const module = pathToFileURL(join(PROJECT_ROOT, 'dist', 'src', 'store', 'store-identity.js')).href;
  const code = `const { dataDirectoryIdentity } = await import(${JSON.stringify(module)}); process.stdout.write(dataDirectoryIdentity(${JSON.stringify(dataDir)}).id);`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  return new Promise((resolve, reject) => child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`exit ${code}`)))));
}

describe('a data directory\'s identity', () => {
  it('is made once: processes asking at once all read the one id written first, and it stays', async () => {
    const dataDir = join(root, 'fresh');
    const ids = await Promise.all(Array.from({ length: 6 }, () => identityInAnotherProcess(dataDir)));
    expect(new Set(ids).size).toBe(1);
    expect(ids[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(dataDirectoryIdentity(dataDir)).toEqual({ id: ids[0], location: `the data directory ${dataDir}` });
    expect(await new LocalStore(dataDir).identity()).toEqual({ id: ids[0], location: `the data directory ${dataDir}` });
    expect(JSON.parse(readFileSync(storeIdFile(dataDir), 'utf8'))).toMatchObject({ id: ids[0] });
  });

  it('is the directory\'s, whatever the path to it; another directory has another', () => {
    const dataDir = join(root, 'real');
    const link = join(root, 'link');
    const made = dataDirectoryIdentity(dataDir);
    symlinkSync(dataDir, link);
    expect(dataDirectoryIdentity(link).id).toBe(made.id);
    expect(dataDirectoryIdentity(join(root, 'other')).id).not.toBe(made.id);
  });

  it('is only read when asked not to make one, and a file with no id in it is said so, by its path', () => {
    const dataDir = join(root, 'untouched');
    expect(dataDirectoryIdentity(dataDir, { create: false })).toBeUndefined();
    const broken = join(root, 'broken');
    dataDirectoryIdentity(broken);
    writeFileSync(storeIdFile(broken), '{}');
    expect(() => dataDirectoryIdentity(broken)).toThrow(`the store id file ${storeIdFile(broken)} holds no id: remove it to make a new one`);
  });
});
