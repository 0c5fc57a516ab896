/**
 * The harness's disk model (test/support/crash-disk.ts) on records written by hand, in strace's
 * format, over real files: what a power loss keeps of each.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseTrace, pathsUnder, reconstructDisk } from '../support/crash-disk.js';

function folder() {
  const dir = mkdtempSync(join(tmpdir(), 'crash-disk-'));
  return { dir, existing: pathsUnder(dir) };
}

describe('what the disk keeps after a power loss', () => {
  it('a file written after its last sync is cut back to its size at that sync; one never synced is emptied', () => {
    const { dir, existing } = folder();
    writeFileSync(join(dir, 'seg'), 'a'.repeat(300));
    writeFileSync(join(dir, 'never'), 'b'.repeat(50));
    const record = [
      `1 openat(AT_FDCWD, "${dir}/seg", O_WRONLY|O_CREAT|O_EXCL, 0666) = 3<${dir}/seg>`,
      `1 openat(AT_FDCWD, "${dir}/never", O_WRONLY|O_CREAT, 0666) = 4<${dir}/never>`,
      `1 fsync(5<${dir}>) = 0`,
      `1 writev(3<${dir}/seg>, [{iov_base="x", iov_len=100}], 1) = 100`,
      // strace pads a short pid to the width of the longest it has seen.
      `2    write(3<${dir}/seg>, "y"..., 100) = 100`,
      // A sync that started before the third write: it covers 200 bytes, not 300.
      `3 fdatasync(3<${dir}/seg> <unfinished ...>`,
      `2 write(3<${dir}/seg>, "z"..., 100) = 100`,
      `3 <... fdatasync resumed>) = 0`,
      `1 write(4<${dir}/never>, "b"..., 50) = 50`,
    ].join('\n');
    const { dropped } = reconstructDisk(dir, parseTrace(record, dir), existing);
    expect(statSync(join(dir, 'seg')).size).toBe(200);
    expect(statSync(join(dir, 'never')).size).toBe(0);
    expect(dropped).toEqual(
      expect.arrayContaining([
        { path: 'seg', what: 'cut', sizeAtKill: 300, sizeKept: 200 },
        { path: 'never', what: 'emptied', sizeAtKill: 50, sizeKept: 0 },
      ]),
    );
  });

  it('a name its folder was not synced after is lost; a rename goes back; SQLite keeps what it wrote', () => {
    const { dir, existing } = folder();
    mkdirSync(join(dir, 'lake'));
    writeFileSync(join(dir, 'lake', 'x.parquet'), 'PAR1');
    writeFileSync(join(dir, 'final'), 'whole');
    writeFileSync(join(dir, 'lake', 'catalog.sqlite'), 'pages');
    const record = [
      `1 openat(AT_FDCWD, "${dir}/.final.tmp", O_WRONLY|O_CREAT|O_EXCL, 0666) = 3<${dir}/.final.tmp>`,
      `1 write(3<${dir}/.final.tmp>, "whole", 5) = 5`,
      `1 fsync(3<${dir}/.final.tmp>) = 0`,
      `1 fsync(4<${dir}>) = 0`,
      `1 mkdir("${dir}/lake", 0777) = 0`,
      `1 rename("${dir}/.final.tmp", "${dir}/final") = 0`,
      `1 openat(AT_FDCWD, "${dir}/lake/catalog.sqlite", O_RDWR|O_CREAT, 0644) = 5<${dir}/lake/catalog.sqlite>`,
      `1 write(5<${dir}/lake/catalog.sqlite>, "pages", 5) = 5`,
      `1 openat(AT_FDCWD, "${dir}/lake/x.parquet", O_WRONLY|O_CREAT|O_TRUNC, 0644) = 6<${dir}/lake/x.parquet>`,
      `1 write(6<${dir}/lake/x.parquet>, "PAR1", 4) = 4`,
      `1 fsync(5<${dir}/lake/catalog.sqlite>) = 0`,
      `1 fsync(7<${dir}/lake>) = 0`,
      `1 openat(AT_FDCWD, "${dir}/lake/y.parquet", O_WRONLY|O_CREAT|O_TRUNC, 0644) = 8<${dir}/lake/y.parquet>`,
    ].join('\n');
    writeFileSync(join(dir, 'lake', 'y.parquet'), '');
    const result = reconstructDisk(dir, parseTrace(record, dir), existing);
    // The rename was never followed by a sync of its folder: the file is back under its temporary name.
    expect(existsSync(join(dir, 'final'))).toBe(false);
    expect(readFileSync(join(dir, '.final.tmp'), 'utf8')).toBe('whole');
    // x.parquet's name was synced with its folder, its contents never: emptied. y.parquet's name was never synced.
    expect(statSync(join(dir, 'lake', 'x.parquet')).size).toBe(0);
    expect(existsSync(join(dir, 'lake', 'y.parquet'))).toBe(false);
    expect(readFileSync(join(dir, 'lake', 'catalog.sqlite'), 'utf8')).toBe('pages');
    // The folder was made before a sync completed (kept), but its parent was never synced after.
    expect(result.foldersNeverSynced).toEqual(['lake']);
    expect(result.dropped.map((file) => `${file.what} ${file.path}`).sort()).toEqual(['emptied lake/x.parquet', 'name lost lake/y.parquet', 'renamed back final']);
  });
});
