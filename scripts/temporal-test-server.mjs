/**
 * Temporal's time-skipping test server, which TestWorkflowEnvironment.createTimeSkipping() runs:
 * the Java SDK's test server from Maven Central (io.temporal:temporal-test-server, with the jars it
 * runs with), copied by Maven into .tools/temporal-test-server/lib, beside a launcher that runs it
 * with the machine's Java (17 or newer). @temporalio/testing would otherwise download a native
 * build of it at run time from outside the registries reachable here; the tests point it at this
 * launcher instead (test/support/time-skipping.ts). Maven's local repository is a temporary folder
 * inside .tools, removed afterwards; `--strict-checksums` fails the install on a jar whose checksum
 * does not match the repository's. Used by scripts/setup.mjs.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const TEMPORAL_TEST_SERVER_VERSION = '1.31.0';
const pom = join(dirname(fileURLToPath(import.meta.url)), 'temporal-test-server', 'pom.xml');

// `exec`, so that the SDK's kill on shutdown reaches the JVM rather than a shell in front of it.
const LAUNCHER = `#!/bin/sh
# Written by scripts/setup.mjs: Temporal's test server (Java SDK ${TEMPORAL_TEST_SERVER_VERSION}) on the port given.
dir=$(cd "$(dirname "$0")" && pwd)
exec java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp "$dir/lib/*" io.temporal.testserver.TestServer "$@"
`;

/** Installs the test server into `dest` unless its INSTALLED marker names this version. Returns whether it installed. */
export function ensureTemporalTestServer(tools, dest, log) {
  const marker = join(dest, 'INSTALLED');
  const wanted = `io.temporal:temporal-test-server:${TEMPORAL_TEST_SERVER_VERSION}\n`;
  if (existsSync(marker) && readFileSync(marker, 'utf8') === wanted) return false;
  log(`installing Temporal's time-skipping test server (Java SDK ${TEMPORAL_TEST_SERVER_VERSION}) into .tools/temporal-test-server from Maven Central`);
  mkdirSync(tools, { recursive: true });
  const scratch = mkdtempSync(join(tools, 'maven-'));
  const partial = `${dest}.partial`;
  rmSync(partial, { recursive: true, force: true });
  try {
    execFileSync(
      'mvn',
      ['--batch-mode', '--quiet', '--strict-checksums', '-f', pom, `-Dmaven.repo.local=${join(scratch, 'repository')}`, `-Dtemporal.test.server.version=${TEMPORAL_TEST_SERVER_VERSION}`, 'dependency:copy-dependencies', `-DoutputDirectory=${join(partial, 'lib')}`],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    );
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  writeFileSync(join(partial, 'temporal-test-server'), LAUNCHER, { mode: 0o755 });
  chmodSync(join(partial, 'temporal-test-server'), 0o755);
  writeFileSync(join(partial, 'INSTALLED'), wanted);
  rmSync(dest, { recursive: true, force: true });
  renameSync(partial, dest);
  return true;
}
