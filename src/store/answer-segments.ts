/**
 * A data directory's runs with answers, as folders: which runs hold answers not yet cleared (their
 * segments, and landing files of earlier versions), and their removal once loaded. The segments
 * themselves are written and read by AnswerSegments (landing.ts, beside the landing it lands),
 * named here too for src/store/shared, which imports it from here.
 */
import { readdir, rm } from 'node:fs/promises';
import { landingRoot, runLandingFolder, runSegmentFolder, segmentRoot } from './layout.js';

export { AnswerSegments, newSegmentFileName } from './landing.js';

/** The run folders that hold answers not yet cleared: segments, and landing files of earlier versions. */
export async function runFoldersWithAnswers(dataDir: string): Promise<{ segments: string[]; landingFiles: string[] }> {
  const list = async (root: string) => {
    try {
      return (await readdir(root, { withFileTypes: true })).filter((entry) => entry.isDirectory()).map((entry) => entry.name);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
  };
  return { segments: await list(segmentRoot(dataDir)), landingFiles: await list(landingRoot(dataDir)) };
}

/** Removes a run's answers from the data directory: its segments and any landing files of earlier versions. */
export async function removeRunAnswers(dataDir: string, runFolder: string): Promise<void> {
  await rm(runSegmentFolder(dataDir, runFolder), { recursive: true, force: true });
  await rm(runLandingFolder(dataDir, runFolder), { recursive: true, force: true });
}
