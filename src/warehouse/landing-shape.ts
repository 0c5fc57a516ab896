/**
 * A landing's shape, and the load package's file for each shape: the one place a load, and a
 * rebuild of the lake from its raw answers, tell a list page from a resource page, a run's status
 * and a media file.
 */
import { isMediaLandingKey, isRunLandingKey, loadPackageFile } from '../store/layout.js';
import type { LandingShape } from './raw-columns.js';

export const LANDING_SHAPES: readonly LandingShape[] = ['list', 'object', 'run', 'media'];

const CLOSE_BRACKET = 0x5d;
const CLOSE_BRACE = 0x7d;

/**
 * A landing's shape, by its key (a run's status, a media file) or else from its last bytes: a
 * landing's text always has `data` as its last member (landingText), so the byte before the
 * closing brace ends the data value, `]` for a list and `}` for a resource. Undefined when the
 * bytes end otherwise. `bytes` must not end in whitespace.
 */
export function landingShape(key: string, bytes: Uint8Array): LandingShape | undefined {
  if (isRunLandingKey(key)) return 'run';
  if (isMediaLandingKey(key)) return 'media';
  const end = bytes.length - 1;
  if (bytes[end] !== CLOSE_BRACE) return undefined;
  const last = bytes[end - 1];
  if (last === CLOSE_BRACKET) return 'list';
  if (last === CLOSE_BRACE) return 'object';
  return undefined;
}

/** A load package's files in `packageFolder`, one per shape (layout.ts names them). */
export function loadPackageFiles(packageFolder: string): Record<LandingShape, string> {
  return Object.fromEntries(LANDING_SHAPES.map((shape) => [shape, loadPackageFile(packageFolder, shape)])) as Record<LandingShape, string>;
}
