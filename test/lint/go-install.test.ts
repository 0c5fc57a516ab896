/**
 * scripts/go-install.mjs's reading of a Go binary's build information, which decides whether setup
 * builds MinIO: a binary of the pinned version built by goInstall (-trimpath, -ldflags="-s -w") is kept;
 * one built with its symbol table (an older setup's) is built again, once.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
// @ts-expect-error -- a plain .mjs script of setup, without types
import { installedGoModule } from '../../scripts/go-install.mjs';

const installed = installedGoModule as (binary: string, modulePath: string) => string | undefined;
const MODULE = 'github.com/minio/minio';
const VERSION = 'v0.0.0-20260212201848-7aac2a2c5b7c';

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A file holding the build information lines Go writes into a binary, between other bytes. */
function binary(buildLines: string[]): string {
  dir ??= mkdtempSync(join(tmpdir(), 'go-install-'));
  const path = join(dir, `minio-${buildLines.length}`);
  const info = [`path\t${MODULE}`, `mod\t${MODULE}\t${VERSION}\th1:/qdoYujxF5MBLDMVLeiYJ/7fBa1HikX39Dvzb9Ji8pA=`, ...buildLines].join('\n');
  writeFileSync(path, Buffer.concat([Buffer.alloc(4096, 0x7f), Buffer.from(`${info}\n`), Buffer.alloc(4096, 0)]));
  return path;
}

it('names the module version of a binary built stripped, and nothing for one built with its symbol table', () => {
  // As goInstall builds now (-trimpath): Go writes no -ldflags line then. These are the lines of the
  // MinIO binary a fresh setup built on 2026-11-28, which the check before named nothing (rebuilt at every setup).
  const stripped = binary(['build\t-buildmode=exe', 'build\t-compiler=gc', 'build\t-trimpath=true', 'build\tCGO_ENABLED=0']);
  expect(installed(stripped, MODULE)).toBe(`${MODULE}@${VERSION}`);
  // As goInstall built before it passed -trimpath.
  const strippedBefore = binary(['build\t-buildmode=exe', 'build\t-compiler=gc', 'build\t-ldflags="-s -w"', 'build\tCGO_ENABLED=1']);
  expect(installed(strippedBefore, MODULE)).toBe(`${MODULE}@${VERSION}`);
  const withSymbols = binary(['build\t-buildmode=exe', 'build\t-compiler=gc', 'build\tCGO_ENABLED=1']);
  expect(installed(withSymbols, MODULE)).toBeUndefined();
  expect(installed(stripped, 'github.com/prometheus/prometheus')).toBeUndefined();
  expect(installed(join(dir!, 'absent'), MODULE)).toBeUndefined();
});

