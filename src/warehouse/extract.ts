/**
 * The extract stage of a load: which answers are new, and the batch's answers into a load package.
 *
 * Which are new is learned from what the data directory still holds, never from history: answers
 * are removed from the data directory once they are in the lake and their run is over, so what is
 * here is the work of runs still open (or failed, kept for their retry) and what is not loaded yet.
 * For each segment the lake records how far it was loaded (`loaded_segments`, in the same snapshot
 * as the rows), so a load reads each segment from there on; landing files of earlier versions are
 * checked against `loaded_landings` by their keys. Either way the cost follows what the data
 * directory holds, not what the lake holds.
 *
 * The load package is the files DuckDB reads a batch from. Landings are copied as raw bytes, never
 * parsed in JavaScript: DuckDB's JSON reader parses them several times faster, and parsing,
 * normalizing and re-serializing in JavaScript was most of a load's time. Each landing goes into
 * the package file of its shape, with its key added as `_landing`, so every row read stays
 * traceable to the file it came from. Page answers are also compared, as they are packaged, with
 * their resource's schema, under their harvest's schema contract (schema-drift.ts's DriftSampler:
 * which answers are compared, what is recorded, and which are cut or set aside).
 */
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, readSync, rmSync, statSync, writeSync } from 'node:fs';
import { setImmediate as setImmediatePromise } from 'node:timers/promises';
import type { DuckDBConnection } from '@duckdb/node-api';
import { runFoldersWithAnswers } from '../store/answer-segments.js';
import { filesUnder, landingText, notJsonReason, type Landing, type UnloadableLanding } from '../store/landing.js';
import { mayNeedRepair } from '../store/text-repair.js';
import { keyOfFile, landingRoot, listRunSegments, quarantineFile, runFolderOfKey, runLandingFolder } from '../store/layout.js';
import { quarantinedFilesOfRun } from '../store/quarantine.js';
import { readSegment, type SegmentRead } from '../store/segment.js';
import { sqlString } from './duckdb.js';
import { RETRYABLE_STATUSES } from '../harvest/checkpoint.js';
import { DriftSampler, type SchemaDriftRow } from './schema-drift.js';
import type { SchemaContracts } from '../harvest/schema-contract.js';
import type { LandingShape } from './raw-columns.js';
import { LANDING_SHAPES, landingShape, loadPackageFiles } from './landing-shape.js';

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
    for (const { id, file } of await listRunSegments(dataDir, runFolder)) segments.push({ id, file });
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
    const runFolder = runFolderOfKey(segment.id);
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
    for (const file of filesUnder(runLandingFolder(dataDir, runFolder))) {
      const key = keyOfFile(root, file);
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
 * (after this load) and their run is over for good, neither running nor left for a retry. A run
 * with answers in quarantine/ is not over: its final status is about to say so
 * (`completed_with_errors`, activities/runs.ts), and its segments stay for the retry that loads them.
 */
export async function foldersOfEndedRuns(connection: DuckDBConnection, runFolders: Map<string, string | undefined>, dataDir: string): Promise<string[]> {
  const runOf = new Map<string, string>();
  for (const [folder, runId] of runFolders) if (runId !== undefined && !hasQuarantinedLandings(dataDir, folder)) runOf.set(folder, runId);
  if (runOf.size === 0) return [];
  const kept = ['running', ...RETRYABLE_STATUSES].map(sqlString).join(', ');
  const reader = await connection.runAndReadAll(`SELECT run_id FROM harvest_runs WHERE run_id IN (${[...new Set(runOf.values())].map(sqlString).join(', ')}) AND status NOT IN (${kept})`);
  const ended = new Set(reader.getRows().map((row) => String(row[0])));
  return [...runOf].filter(([, id]) => ended.has(id)).map(([folder]) => folder);
}

/** Whether a run folder has landings in quarantine/ (each with its reason). */
function hasQuarantinedLandings(dataDir: string, runFolder: string): boolean {
  return quarantinedFilesOfRun(dataDir, runFolder).length > 0;
}

function runIdOfLandingFile(file: string): string | undefined {
  try {
    const runId = (JSON.parse(readFileSync(file, 'utf8')) as { run_id?: unknown }).run_id;
    return typeof runId === 'string' ? runId : undefined;
  } catch {
    return undefined;
  }
}

export interface LoadPackage {
  /** One NDJSON file per shape (empty when the batch has no landing of that shape). */
  files: Record<LandingShape, string>;
  /** The landings packaged, by key. */
  keys: string[];
  /** The answers packaged. */
  answers: PendingAnswer[];
  /** Landings left out because they cannot be loaded as they are (not a one-line JSON object with its data last). */
  rejected: UnloadableLanding[];
  /** Fields the batch's sampled answers carry and no column takes (schema-drift.ts). */
  drift: SchemaDriftRow[];
}

const OPEN_BRACE = 0x7b;
const NEWLINE = 0x0a;
/** JSON's whitespace: an editor's trailing newline does not make a landing unloadable. */
const WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);

/**
 * Appends to a file through one reused buffer. Written by hand because a batch moves tens of MB
 * through here: reading each landing into a fresh Buffer and concatenating them touched so much new
 * memory that page faults alone cost a tenth of a load.
 */
class BufferedFile {
  private readonly fd: number;
  private buffer = Buffer.allocUnsafe(4 << 20);
  private used = 0;

  constructor(path: string) {
    this.fd = openSync(path, 'w');
  }

  /** Room for `bytes` more bytes, flushing (and growing for a landing larger than the buffer) as needed. */
  reserve(bytes: number): { buffer: Buffer; offset: number } {
    if (this.used + bytes > this.buffer.length) this.flush();
    if (bytes > this.buffer.length) this.buffer = Buffer.allocUnsafe(bytes);
    return { buffer: this.buffer, offset: this.used };
  }

  commit(bytes: number): void {
    this.used += bytes;
  }

  close(): void {
    this.flush();
    closeSync(this.fd);
  }

  private flush(): void {
    let written = 0;
    while (written < this.used) written += writeSync(this.fd, this.buffer, written, this.used - written);
    this.used = 0;
  }
}

/** Landings copied between two yields to the event loop. */
const LANDINGS_PER_TURN = 100;

/**
 * Extracts a batch of answers (landing files, or frames of segments): writes their package into
 * `directory` (replacing what was there).
 * It yields to the event loop every few landings, so the loader can write the next batch's package
 * while DuckDB loads the current one: the reads here and DuckDB's work then share the cores.
 */
export async function extract(answers: readonly PendingAnswer[], directory: string, contracts: SchemaContracts = {}): Promise<LoadPackage> {
  rmSync(directory, { recursive: true, force: true });
  mkdirSync(directory, { recursive: true });
  const files = loadPackageFiles(directory);
  const outputs = Object.fromEntries(LANDING_SHAPES.map((shape) => [shape, new BufferedFile(files[shape])])) as Record<LandingShape, BufferedFile>;
  let landing = Buffer.allocUnsafe(1 << 20);
  const packaged: PendingAnswer[] = [];
  const rejected: UnloadableLanding[] = [];
  const drift = new DriftSampler(contracts);
  // A segment holds many answers: its file is opened once for the batch.
  const opened = new Map<string, number>();
  try {
    for (const [index, answer] of answers.entries()) {
      if (index % LANDINGS_PER_TURN === LANDINGS_PER_TURN - 1) await setImmediatePromise();
      const { key } = answer;
      let fd = opened.get(answer.file);
      if (fd === undefined) {
        fd = openSync(answer.file, 'r');
        opened.set(answer.file, fd);
      }
      if (answer.length > landing.length) landing = Buffer.allocUnsafe(answer.length);
      let size = 0;
      while (size < answer.length) {
        const got = readSync(fd, landing, size, answer.length - size, answer.offset + size);
        if (got === 0) break;
        size += got;
      }
      while (size > 0 && WHITESPACE.has(landing[size - 1] as number)) size--;
      const problem = landingProblem(key, landing.subarray(0, size));
      if (typeof problem === 'string') {
        rejected.push({ key, reason: notJsonReason(landing.subarray(0, size).toString('utf8')) ?? problem });
        continue;
      }
      let bytes = repairedLanding(landing.subarray(0, size)) ?? landing.subarray(0, size);
      // A page's fields beyond its resource's schema, under its harvest's contract (schema-drift.ts).
      if (problem.shape === 'list' || problem.shape === 'object') {
        const verdict = drift.consider(bytes);
        if ('rejected' in verdict) {
          rejected.push({ key, reason: verdict.rejected });
          continue;
        }
        bytes = verdict.bytes;
      }
      // The landing's members follow its key: `{"_landing":"<key>",` then the file without its `{`.
      const header = `{"_landing":${JSON.stringify(key)},`;
      const output = outputs[problem.shape];
      const { buffer, offset } = output.reserve(Buffer.byteLength(header) + bytes.length);
      let end = offset + buffer.write(header, offset);
      end += bytes.copy(buffer, end, 1, bytes.length);
      buffer[end++] = NEWLINE;
      output.commit(end - offset);
      packaged.push(answer);
    }
  } finally {
    for (const fd of opened.values()) closeSync(fd);
    for (const output of Object.values(outputs)) output.close();
  }
  return { files, keys: packaged.map((answer) => answer.key), answers: packaged, rejected, drift: drift.rows() };
}

/** `\u`: where a JSON text may escape a lone surrogate or a NUL. */
const ESCAPE = Buffer.from('\\u');

/**
 * A landed answer whose text is not well-formed Unicode (a lone surrogate, a NUL), repaired and its
 * repairs recorded as a landing of this version does as it lands (landingText): an answer landed by
 * an earlier version, or put back from quarantine by `harvester retry`, loads instead of being set
 * aside again. Undefined when there is nothing to repair, or when the text is not JSON (the load
 * sets that aside with its reason). Only answers with a `\u` escape are parsed: most have none.
 */
function repairedLanding(bytes: Buffer): Buffer | undefined {
  if (bytes.indexOf(ESCAPE) === -1) return undefined;
  const text = bytes.toString('utf8');
  if (!mayNeedRepair(text)) return undefined;
  let landing: Landing;
  try {
    landing = JSON.parse(text) as Landing;
  } catch {
    return undefined;
  }
  const repaired = landingText(landing);
  return repaired === text ? undefined : Buffer.from(repaired);
}

/**
 * What keeps a landing's bytes out of a package, or its shape when nothing does. A package is read
 * as newline-delimited JSON, a landing per line, so a landing must be one line (landingText
 * writes it so): one over several lines would break its own line and the next.
 */
function landingProblem(key: string, bytes: Buffer): string | { shape: LandingShape } {
  if (bytes.length === 0 || bytes[0] !== OPEN_BRACE) return 'it does not hold a JSON object';
  if (bytes.indexOf(NEWLINE) !== -1) return 'it spans several lines (a landing is one line of JSON, as the harvester writes it)';
  const shape = landingShape(key, bytes);
  return shape ? { shape } : 'its data is neither a list nor an object';
}
