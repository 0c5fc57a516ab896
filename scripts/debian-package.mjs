/**
 * One file of a Debian package, as a prebuilt binary for .tools: `apt-get download` fetches the
 * package (checking it against the hashes of the archive's signed index, as apt does for any
 * install) into a temporary folder, and `dpkg-deb` unpacks the one file, without installing the
 * package and without root. It never runs `apt-get update`: that writes the system's package lists,
 * and setup changes nothing outside the project.
 * Used by scripts/setup.mjs.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * `apt-get download` of `name` into `dir`. A machine whose package lists were never fetched knows
 * no package, and the error is thrown (the caller then builds the program instead).
 */
function download(name, dir) {
  execFileSync('apt-get', ['download', '--quiet', name], { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

/**
 * Writes `member` (an absolute path inside the package) of Debian's package `name`, at the version
 * apt's package lists hold, to `dest` (through a .partial file, renamed once complete). Returns the
 * package's version. Throws when apt cannot fetch it (not Debian, or no package lists).
 */
export function extractDebianBinary(name, member, dest) {
  const scratch = mkdtempSync(join(tmpdir(), 'debian-package-'));
  try {
    download(name, scratch);
    const deb = readdirSync(scratch).find((file) => file.endsWith('.deb'));
    if (!deb) throw new Error(`apt-get download ${name} left no .deb`);
    const version = execFileSync('dpkg-deb', ['--field', join(scratch, deb), 'Version'], { encoding: 'utf8' }).trim();
    const tar = execFileSync('dpkg-deb', ['--fsys-tarfile', join(scratch, deb)], { maxBuffer: 1 << 30 });
    const file = execFileSync('tar', ['-x', '-O', '-f', '-', `.${member}`], { input: tar, maxBuffer: 1 << 30 });
    writeFileSync(`${dest}.partial`, file, { mode: 0o755 });
    chmodSync(`${dest}.partial`, 0o755);
    renameSync(`${dest}.partial`, dest);
    return version;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
