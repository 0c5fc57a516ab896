/**
 * The extract stage of a load: a batch of landings gathered into a load package, the files DuckDB
 * reads them from. Landing files are copied as raw bytes, never parsed in JavaScript: DuckDB's JSON
 * reader parses them several times faster, and parsing, normalizing and re-serializing in
 * JavaScript was most of a load's time. Each landing goes into the package file of its shape, with
 * its key added as `_landing`, so every row read stays traceable to the file it came from.
 */
import { closeSync, mkdirSync, openSync, readSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { setImmediate as setImmediatePromise } from 'node:timers/promises';
import { isRunLandingKey, notJsonReason, type UnloadableLanding } from '../store/landing.js';
import type { PendingAnswer } from './pending-answers.js';
import { DriftSampler, type SchemaDriftRow } from './schema-drift.js';
import type { LandingShape } from './raw-columns.js';

const LANDING_SHAPES: readonly LandingShape[] = ['list', 'object', 'run'];

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
const CLOSE_BRACKET = 0x5d;
const CLOSE_BRACE = 0x7d;
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
export async function extract(answers: readonly PendingAnswer[], directory: string): Promise<LoadPackage> {
  rmSync(directory, { recursive: true, force: true });
  mkdirSync(directory, { recursive: true });
  const files = Object.fromEntries(LANDING_SHAPES.map((shape) => [shape, join(directory, `${shape}.jsonl`)])) as Record<LandingShape, string>;
  const outputs = Object.fromEntries(LANDING_SHAPES.map((shape) => [shape, new BufferedFile(files[shape])])) as Record<LandingShape, BufferedFile>;
  let landing = Buffer.allocUnsafe(1 << 20);
  const packaged: PendingAnswer[] = [];
  const rejected: UnloadableLanding[] = [];
  const drift = new DriftSampler();
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
      // The landing's members follow its key: `{"_landing":"<key>",` then the file without its `{`.
      const header = `{"_landing":${JSON.stringify(key)},`;
      const output = outputs[problem.shape];
      const { buffer, offset } = output.reserve(Buffer.byteLength(header) + size);
      let end = offset + buffer.write(header, offset);
      end += landing.copy(buffer, end, 1, size);
      buffer[end++] = NEWLINE;
      output.commit(end - offset);
      packaged.push(answer);
      if (problem.shape !== 'run') drift.consider(landing.subarray(0, size));
    }
  } finally {
    for (const fd of opened.values()) closeSync(fd);
    for (const output of Object.values(outputs)) output.close();
  }
  return { files, keys: packaged.map((answer) => answer.key), answers: packaged, rejected, drift: drift.rows() };
}

/**
 * What keeps a landing's bytes out of a package, or its shape when nothing does. A package is read
 * as newline-delimited JSON, a landing per line, so a landing must be one line (`writeLanding`
 * writes it so): one over several lines would break its own line and the next.
 */
function landingProblem(key: string, bytes: Buffer): string | { shape: LandingShape } {
  if (bytes.length === 0 || bytes[0] !== OPEN_BRACE) return 'it does not hold a JSON object';
  if (bytes.indexOf(NEWLINE) !== -1) return 'it spans several lines (a landing is one line of JSON, as the harvester writes it)';
  const shape = shapeOf(key, bytes);
  return shape ? { shape } : 'its data is neither a list nor an object';
}

/**
 * A page landing's shape, read from its last bytes: `writeLanding` always writes `data` as the
 * last member, so the byte before the closing brace ends the data value, `]` for a list and `}`
 * for a resource. Undefined when the bytes end otherwise.
 */
function shapeOf(key: string, bytes: Buffer): LandingShape | undefined {
  if (isRunLandingKey(key)) return 'run';
  const end = bytes.length - 1;
  if (bytes[end] !== CLOSE_BRACE) return undefined;
  const last = bytes[end - 1];
  if (last === CLOSE_BRACKET) return 'list';
  if (last === CLOSE_BRACE) return 'object';
  return undefined;
}
