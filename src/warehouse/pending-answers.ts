/**
 * What a load has to load, learned from what the data directory still holds, never from history:
 * answers are removed from the data directory once they are in the lake and their run is over, so
 * what is here is the work of runs still open (or failed, kept for their retry) and what is not
 * loaded yet. For each segment the lake records how far it was loaded (`loaded_segments`, in the
 * same snapshot as the rows), so a load reads each segment from there on; landing files of earlier
 * versions are checked against `loaded_landings` by their keys. Either way the cost follows what
 * the data directory holds, not what the lake holds.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import type { DuckDBConnection } from '@duckdb/node-api';
import { runFoldersWithAnswers } from '../store/answer-segments.js';
import { filesUnder } from '../store/landing.js';
import { landingRoot, parseSegmentFileName, quarantineFile, runFolderOfKey, runSegmentFolder, segmentId } from '../store/layout.js';
import { readSegment, type SegmentRead } from '../store/segment.js';
import { sqlString } from './duckdb.js';
import { RETRYABLE_STATUSES } from '../harvest/checkpoint.js';

/** One answer to load: its landing key and where its text lies (a whole landing file, or a frame of a segment). */
export interface PendingAnswer {
  key: string;
  file: string;
  offset: number;
  length: number;
  /** Already in the lake (or twice among the pending): read past, not loaded again. */
  skip?: boolean;
  /** For a segment's frame: the segment, and the offset just past the frame. */
  segment?: { id: string; runId: string; end: number };
}

export interface PendingAnswers {
  answers: PendingAnswer[];
  /** Run folders of the data directory with answers in them, by folder name: their run ids where known. */
  runFolders: Map<string, string | undefined>;
}

/** Keys asked of the lake at once. */
const KEYS_PER_QUERY = 5000;

export async function pendingAnswers(connection: DuckDBConnection, dataDir: string): Promise<PendingAnswers> {
  const folders = await runFoldersWithAnswers(dataDir);
  const runFolders = new Map<string, string | undefined>();
  const answers: PendingAnswer[] = [];

  const segments: { id: string; file: string }[] = [];
  for (const runFolder of folders.segments) {
    runFolders.set(runFolder, undefined);
    const folder = runSegmentFolder(dataDir, runFolder);
    for (const name of readdirSync(folder).sort()) if (parseSegmentFileName(name)) segments.push({ id: segmentId(runFolder, name), file: join(folder, name) });
  }
  // Read whole (the run's own answers, never history): the frames before the loaded offset say
  // which of the run's keys are in the lake, so a page landed again by a second attempt is not.
  // One at a time: a segment is read whole, and memory follows one segment, not the run's.
  const read: { id: string; file: string; read: SegmentRead }[] = [];
  for (const segment of segments) read.push({ ...segment, read: await readSegment(segment.file) });
  const runIds = [...new Set(read.flatMap((segment) => (segment.read.header ? [segment.read.header.run_id] : [])))];
  const loaded = await loadedSegmentsOfRuns(connection, runIds);
  /** Keys each run folder's segments hold before where they were loaded to: loaded already. */
  const loadedKeys = new Map<string, Set<string>>();
  for (const segment of read) {
    const { header, frames } = segment.read;
    if (!header) continue;
    const runFolder = segment.id.slice(0, segment.id.indexOf('/'));
    runFolders.set(runFolder, header.run_id);
    const loadedEnd = loaded.offsets.get(segment.id) ?? 0;
    const keys = loadedKeys.get(runFolder) ?? new Set<string>();
    loadedKeys.set(runFolder, keys);
    for (const frame of frames) {
      if (frame.end <= loadedEnd) keys.add(frame.key);
      else answers.push({ key: frame.key, file: segment.file, offset: frame.textOffset, length: frame.textLength, segment: { id: segment.id, runId: header.run_id, end: frame.end } });
    }
  }

  for (const runFolder of folders.landingFiles) {
    const root = landingRoot(dataDir);
    for (const file of filesUnder(join(root, runFolder))) {
      const key = relative(root, file).split(sep).join('/');
      if (!key.endsWith('.json') || key.split('/').some((part) => part.startsWith('.'))) continue;
      answers.push({ key, file, offset: 0, length: statSync(file).size });
      // A landing file names its run inside: the first that parses says the folder's.
      if (runFolders.get(runFolder) === undefined) runFolders.set(runFolder, runIdOfLandingFile(file));
    }
  }

  await addKeysOfClearedSegments(connection, answers, new Set(segments.map((segment) => segment.id)), loaded.byRun, loadedKeys);
  await markLoaded(connection, dataDir, answers, loadedKeys);
  return { answers, runFolders };
}

/**
 * What `loaded_segments` says of the segments of these runs, in one query: how far each was loaded,
 * and which segments each run had (those no longer in the folder were cleared).
 */
async function loadedSegmentsOfRuns(connection: DuckDBConnection, runIds: string[]): Promise<{ offsets: Map<string, number>; byRun: Map<string, string[]> }> {
  const offsets = new Map<string, number>();
  const byRun = new Map<string, string[]>();
  for (let start = 0; start < runIds.length; start += KEYS_PER_QUERY) {
    const chunk = runIds.slice(start, start + KEYS_PER_QUERY);
    const reader = await connection.runAndReadAll(`SELECT run_id, segment, max(end_offset) FROM loaded_segments WHERE run_id IN (${chunk.map(sqlString).join(', ')}) GROUP BY ALL`);
    for (const [runId, id, end] of reader.getRows()) {
      offsets.set(String(id), Number(end));
      byRun.set(String(runId), [...(byRun.get(String(runId)) ?? []), String(id)]);
    }
  }
  return { offsets, byRun };
}

/**
 * A run whose answers were loaded and cleared, and that lands again (an attempt that went on after
 * its run ended): its segments no longer say which of its keys are loaded, the lake does. Rare, and
 * asked only for such runs, whose earlier segments `loaded_segments` knows and the folder lacks.
 */
async function addKeysOfClearedSegments(
  connection: DuckDBConnection,
  answers: PendingAnswer[],
  present: Set<string>,
  segmentsOfRuns: Map<string, string[]>,
  loadedKeys: Map<string, Set<string>>,
): Promise<void> {
  const runs = new Map<string, string>();
  for (const answer of answers) if (answer.segment) runs.set(answer.segment.runId, runFolderOfKey(answer.key));
  for (const [runId, folder] of runs) {
    if (!(segmentsOfRuns.get(runId) ?? []).some((segment) => !present.has(segment))) continue;
    const keys = await connection.runAndReadAll(`SELECT landing FROM loaded_landings WHERE run_id = ${sqlString(runId)}`);
    const known = loadedKeys.get(folder) ?? new Set<string>();
    for (const [key] of keys.getRows()) known.add(String(key));
    loadedKeys.set(folder, known);
  }
}

/**
 * Marks the answers not to load again: a segment's frame whose key its run's segments held before
 * where they were loaded to (a page landed again by a second attempt of a work), a landing file of
 * an earlier version whose key the lake has (a load killed before it could clear it), an answer met
 * twice among the pending, and a frame already set aside in quarantine. Only landing files of the
 * earlier layout are looked up in the lake's `loaded_landings`: once they are cleared, no load reads it.
 */
async function markLoaded(connection: DuckDBConnection, dataDir: string, answers: PendingAnswer[], loadedKeys: Map<string, Set<string>>): Promise<void> {
  const loadedFiles = new Set<string>();
  const files = [...new Set(answers.filter((answer) => !answer.segment).map((answer) => answer.key))];
  for (let start = 0; start < files.length; start += KEYS_PER_QUERY) {
    const chunk = files.slice(start, start + KEYS_PER_QUERY);
    const reader = await connection.runAndReadAll(`SELECT landing FROM loaded_landings WHERE landing IN (${chunk.map(sqlString).join(', ')})`);
    for (const [key] of reader.getRows()) loadedFiles.add(String(key));
  }
  const seen = new Set<string>();
  for (const answer of answers) {
    const loaded = answer.segment ? (loadedKeys.get(runFolderOfKey(answer.key))?.has(answer.key) ?? false) || existsSync(quarantineFile(dataDir, answer.key)) : loadedFiles.has(answer.key);
    if (loaded || seen.has(answer.key)) answer.skip = true;
    seen.add(answer.key);
  }
}

/**
 * The run folders whose answers can leave the data directory: every answer of theirs is in the lake
 * (after this load) and their run is over for good, neither running nor left for a retry.
 */
export async function foldersOfEndedRuns(connection: DuckDBConnection, runFolders: Map<string, string | undefined>): Promise<string[]> {
  const runOf = new Map<string, string>();
  for (const [folder, runId] of runFolders) if (runId !== undefined) runOf.set(folder, runId);
  if (runOf.size === 0) return [];
  const kept = ['running', ...RETRYABLE_STATUSES].map(sqlString).join(', ');
  const reader = await connection.runAndReadAll(`SELECT run_id FROM harvest_runs WHERE run_id IN (${[...new Set(runOf.values())].map(sqlString).join(', ')}) AND status NOT IN (${kept})`);
  const ended = new Set(reader.getRows().map((row) => String(row[0])));
  return [...runOf].filter(([, id]) => ended.has(id)).map(([folder]) => folder);
}

function runIdOfLandingFile(file: string): string | undefined {
  try {
    const runId = (JSON.parse(readFileSync(file, 'utf8')) as { run_id?: unknown }).run_id;
    return typeof runId === 'string' ? runId : undefined;
  } catch {
    return undefined;
  }
}
