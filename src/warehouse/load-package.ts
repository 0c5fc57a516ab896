/**
 * The extract stage of a load: a batch of landings gathered into a load package, the files DuckDB
 * reads them from. Landing files are copied as raw bytes, never parsed in JavaScript: DuckDB's JSON
 * reader parses them several times faster, and parsing, normalizing and re-serializing in
 * JavaScript was most of a load's time. Each landing goes into the package file of its shape, with
 * its key added as `_landing`, so every row read stays traceable to the file it came from.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isRunLandingKey, landingRoot } from './landing.js';

/**
 * What a landing holds, which decides the column types DuckDB reads it with: a page whose data is
 * a list of items, a page whose data is one resource, or a run's status.
 */
export type LandingShape = 'list' | 'object' | 'run';
export const LANDING_SHAPES: readonly LandingShape[] = ['list', 'object', 'run'];

export interface LoadPackage {
  /** One NDJSON file per shape (empty when the batch has no landing of that shape). */
  files: Record<LandingShape, string>;
  keys: string[];
}

const OPEN_BRACE = 0x7b;
const CLOSE_BRACKET = 0x5d;
const CLOSE_BRACE = 0x7d;
const NEWLINE = Buffer.from('\n');

/** Writes the package of a batch into `directory` (replacing what was there). */
export function writeLoadPackage(dataDir: string, keys: string[], directory: string): LoadPackage {
  rmSync(directory, { recursive: true, force: true });
  mkdirSync(directory, { recursive: true });
  const parts: Record<LandingShape, Buffer[]> = { list: [], object: [], run: [] };
  for (const key of keys) {
    const file = join(landingRoot(dataDir), ...key.split('/'));
    const bytes = readFileSync(file);
    if (bytes[0] !== OPEN_BRACE) throw new Error(`landing ${file} cannot be read: it does not hold a JSON object`);
    parts[shapeOf(key, bytes, file)].push(Buffer.from(`{"_landing":${JSON.stringify(key)},`), bytes.subarray(1), NEWLINE);
  }
  const files = {} as Record<LandingShape, string>;
  for (const shape of LANDING_SHAPES) {
    files[shape] = join(directory, `${shape}.jsonl`);
    writeFileSync(files[shape], Buffer.concat(parts[shape]));
  }
  return { files, keys };
}

/**
 * A page landing's shape, read from its last bytes: `writeLanding` always writes `data` as the
 * last member, so the byte before the closing brace ends the data value, `]` for a list and `}`
 * for a resource.
 */
function shapeOf(key: string, bytes: Buffer, file: string): LandingShape {
  if (isRunLandingKey(key)) return 'run';
  let end = bytes.length - 1;
  while (end > 0 && bytes[end] !== CLOSE_BRACE) end--;
  const last = bytes[end - 1];
  if (last === CLOSE_BRACKET) return 'list';
  if (last === CLOSE_BRACE) return 'object';
  throw new Error(`landing ${file} cannot be loaded: its data is neither a list nor an object`);
}
