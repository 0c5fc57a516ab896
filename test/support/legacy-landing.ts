/**
 * Landing files of earlier versions: one JSON file per page under `landing/`, written durably
 * (writeDurableFile). This version lands answers in segments (Store.writeLanding) and writes no such
 * file, but still finds them by key and loads (and clears) them after an upgrade: tests write them
 * here to stand for what an earlier version left, and read them back.
 */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { writeDurableFile } from '../../src/store/durable-file.js';
import { filesUnder, landingKey, landingText, type Landing } from '../../src/store/landing.js';
import { keyOfFile, landingFile, landingRoot } from '../../src/store/layout.js';

/** Writes a landing as an earlier version did, a file of its own under its key; returns the key. */
export function writeLegacyLanding(dataDir: string, landing: Landing): string {
  const key = landingKey(landing);
  writeDurableFile(landingFile(dataDir, key), landingText(landing), { what: 'landing' });
  return key;
}

/** The landing file of an earlier version under `key`. */
export function readLegacyLanding(dataDir: string, key: string): Landing {
  return JSON.parse(readFileSync(landingFile(dataDir, key), 'utf8')) as Landing;
}

/** The keys of every landing file of an earlier version in the data directory, sorted; temporaries passed over. */
export function legacyLandingKeys(dataDir: string): string[] {
  const root = landingRoot(dataDir);
  return filesUnder(root)
    .filter((path) => path.endsWith('.json') && !basename(path).startsWith('.'))
    .map((path) => keyOfFile(root, path))
    .sort();
}
