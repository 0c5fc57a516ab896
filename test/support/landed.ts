/**
 * What a data directory holds of landed answers, read synchronously for tests that wait on it:
 * the frames of its segments (src/store/segment.ts) and landing files of the earlier layout.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Landing } from '../../src/store/landing.js';
import { LocalStore } from '../../src/store/store.js';
import { segmentRoot } from '../../src/store/layout.js';
import { framesIn, parseSegmentHeader } from '../../src/store/segment.js';
import { legacyLandingKeys, readLegacyLanding } from './legacy-landing.js';

/** Every landing of the data directory by key (a key landed twice: its first frame). */
export function landedAnswers(dataDir: string): Map<string, Landing> {
  const landings = new Map<string, Landing>();
  const root = segmentRoot(dataDir);
  if (existsSync(root)) {
    for (const run of readdirSync(root).sort()) {
      for (const name of readdirSync(join(root, run)).sort()) {
        const bytes = readFileSync(join(root, run, name));
        const header = parseSegmentHeader(bytes);
        if (!header) continue;
        for (const frame of framesIn(bytes.subarray(header.framesStart), header.framesStart).frames) {
          if (!landings.has(frame.key)) landings.set(frame.key, JSON.parse(bytes.subarray(frame.textOffset, frame.textOffset + frame.textLength).toString('utf8')) as Landing);
        }
      }
    }
  }
  for (const key of legacyLandingKeys(dataDir)) if (!landings.has(key)) landings.set(key, readLegacyLanding(dataDir, key));
  return landings;
}

/** Every landed key, sorted. */
export function landedKeys(dataDir: string): string[] {
  return [...landedAnswers(dataDir).keys()].sort();
}

export function landedLanding(dataDir: string, key: string): Landing {
  const landing = landedAnswers(dataDir).get(key);
  if (!landing) throw new Error(`nothing landed at ${key} in ${dataDir}`);
  return landing;
}

/** Lands an answer as the engine does: into its run's segment, through the data directory's store; resolves with its key once written. */
export function landAnswer(dataDir: string, landing: Landing): Promise<string> {
  return new LocalStore(dataDir).writeLanding(landing);
}
