/**
 * Quarantine: where a landing the loader cannot load is set aside, under `quarantine/` at the
 * same path as under `landing/`, with a `.reason` file beside it. It blocks no load and nothing
 * of it is lost; its run ends `completed_with_errors` (activities/runs.ts), and `harvester retry`
 * puts it back to be loaded (requeueQuarantinedLandings).
 */
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { syncDirectory, writeDurableFile } from './durable-file.js';
import { filesUnder } from './landing.js';
import { isReasonFile, keyOfFile, landingFile, quarantineFile, quarantineRoot, reasonFileOf, runFolderOfRun, runQuarantineFolder } from './layout.js';

/** A quarantined landing as a run's summary and `harvester load` list it: where it is now, and why. */
export function quarantineLine(landing: { file: string; reason: string }): string {
  return `${landing.file}: ${landing.reason}`;
}

/** The files of a run's landings in quarantine, by the run's folder: those with their reason beside them. */
export function quarantinedFilesOfRun(dataDir: string, runFolder: string): string[] {
  return filesUnder(runQuarantineFolder(dataDir, runFolder)).filter((path) => !isReasonFile(path) && existsSync(reasonFileOf(path)));
}

/**
 * A run's landings in quarantine, whichever load set them aside, as quarantineLine says them: what
 * its summary lists. The reason is written first, so a quarantined landing always has one.
 */
export function quarantinedLandingsOfRun(dataDir: string, runId: string): string[] {
  return quarantinedFilesOfRun(dataDir, runFolderOfRun(runId))
    .map((file) => quarantineLine({ file, reason: readFileSync(reasonFileOf(file), 'utf8').trim() }))
    .sort();
}

/** The keys of a run's landings in quarantine (those with their reason beside them). */
function quarantinedKeysOfRun(dataDir: string, runId: string): string[] {
  const root = quarantineRoot(dataDir);
  return quarantinedFilesOfRun(dataDir, runFolderOfRun(runId))
    .map((path) => keyOfFile(root, path))
    .sort();
}

/**
 * Puts a run's landings in quarantine back to be loaded (`harvester retry`): each is written to
 * its place under `landing/`, as a landing file is (a frame's segment was loaded past it, so only a
 * file of its own is loaded again), and only once that is durable is its quarantined copy removed,
 * reason first. A crash between leaves both: the landing loads, and the next retry removes the copy.
 * A load that still cannot load it sets it aside again, with its reason. Returns how many it put back.
 */
export function requeueQuarantinedLandings(dataDir: string, runId: string): number {
  const keys = quarantinedKeysOfRun(dataDir, runId);
  for (const key of keys) {
    const quarantined = quarantineFile(dataDir, key);
    const target = landingFile(dataDir, key);
    mkdirSync(dirname(target), { recursive: true });
    writeDurableFile(target, readFileSync(quarantined), { what: 'landing' });
    rmSync(reasonFileOf(quarantined), { force: true });
    rmSync(quarantined, { force: true });
    syncDirectory(dirname(quarantined));
  }
  return keys.length;
}

/** Sets aside, under `quarantine/` with its reason, a landing's text that is not a file of its own (a segment's frame). */
export function quarantineText(dataDir: string, key: string, text: string, reason: string): string {
  const target = quarantineFile(dataDir, key);
  mkdirSync(dirname(target), { recursive: true });
  writeDurableFile(target, text, { what: 'quarantined landing' });
  // The reason last: the loader skips a frame once its quarantined copy has a reason beside it.
  writeDurableFile(reasonFileOf(target), `${reason}\n`, { what: 'quarantine reason' });
  return target;
}

/**
 * Moves a landing the loader cannot load out of the landing folder, to the same place under
 * `quarantine/`, with a `.reason` file beside it: it blocks no load, and nothing of it is lost.
 * Returns where it now is.
 */
export function quarantineLanding(dataDir: string, key: string, reason: string): string {
  const target = quarantineFile(dataDir, key);
  mkdirSync(dirname(target), { recursive: true });
  // The reason first: a crash between the two leaves the landing where it was (the next load
  // quarantines it again), never a quarantined landing without its reason.
  writeDurableFile(reasonFileOf(target), `${reason}\n`, { what: 'quarantine reason' });
  renameSync(landingFile(dataDir, key), target);
  return target;
}
