/**
 * A data directory's landed answers, in segments (segment.ts): this process appends each run's
 * landings to a segment of its own for that run (`segments/<run>/<writer>-NNNNNN.seg`), so answers
 * that arrive together, from any of the run's works in this process, are written together, and
 * made durable together when any work of the run checkpoints (syncRun, called by the journal's sync).
 * A landing is found again by its key (a retried work reads back what an earlier attempt landed)
 * through an index of the run's segments, built from the files and kept up to date as they grow:
 * its cost follows the run's own answers, never the store's history.
 *
 * Landings of earlier versions, one file each under `landing/`, are still found by their key.
 */
import { randomBytes } from 'node:crypto';
import { readdir, rm } from 'node:fs/promises';
import { resolve } from 'node:path';
import { existsSync, readFileSync } from 'node:fs';
import { landingFile, landingRoot, parseSegmentFileName, runFolderOfKey, runSegmentFolder, segmentFileName, segmentRoot } from './layout.js';
import { landingKey, landingText, type Landing } from './landing.js';
import { readFrameText, readSegment, SegmentWriter, type FrameRef } from './segment.js';
import { syncStoredMedia } from './media-store.js';

/** A segment is closed and the next one begun past this size: a load reads a segment whole. */
const SEGMENT_BYTES = 64 << 20;
/** A run's segment is closed after this long without an answer: its file handle is not held for ever. */
const IDLE_CLOSE_MS = 30_000;

/** This process's name among the writers of segments: unique across processes and machines. */
const WRITER = `${process.pid.toString(36)}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;

/** A new segment's file name, never given before by any process (this process's writer name, and its next number). */
export function newSegmentFileName(): string {
  return segmentFileName({ writer: WRITER, seq: nextSeq++ });
}

const answerSegmentsByFolder = new Map<string, AnswerSegments>();
/** Numbers this process's segments, across data directories and runs: a name is never taken twice. */
let nextSeq = 1;

interface RunWriter {
  writer: SegmentWriter;
  idle: NodeJS.Timeout | undefined;
}

interface IndexedFrame {
  file: string;
  ref: FrameRef;
}

/** What is known of a run's segments: how far each file was read, and where each key's first frame is. */
interface RunIndex {
  readTo: Map<string, number>;
  frames: Map<string, IndexedFrame>;
  /** When it was last asked for (ms). */
  usedAt: number;
}

export class AnswerSegments {
  private readonly writers = new Map<string, RunWriter>();
  private readonly indexes = new Map<string, RunIndex>();
  /** When the indexes were last swept for runs not asked for (ms). */
  private sweptAt = 0;

  private constructor(readonly dataDir: string) {}

  /**
   * The data directory's segments as this process writes them: one per data directory and
   * process, so every store object of the process appends to the same run segment.
   */
  static of(dataDir: string): AnswerSegments {
    const folder = resolve(dataDir);
    let segments = answerSegmentsByFolder.get(folder);
    if (!segments) {
      segments = new AnswerSegments(folder);
      answerSegmentsByFolder.set(folder, segments);
    }
    return segments;
  }

  /** Appends a landing to its run's segment; resolves with its key once it is durable. */
  async land(landing: Landing): Promise<string> {
    const key = landingKey(landing);
    const runFolder = runFolderOfKey(key);
    const run = this.writerOf(runFolder, landing.run_id);
    const ref = await run.writer.append(key, landingText(landing));
    this.indexOf(runFolder).frames.set(key, { file: run.writer.file, ref });
    return key;
  }

  async isLanded(key: string): Promise<boolean> {
    return (await this.frameOf(key)) !== undefined || existsSync(landingFile(this.dataDir, key));
  }

  async find(key: string): Promise<Landing | undefined> {
    const text = await this.text(key);
    return text === undefined ? undefined : (JSON.parse(text) as Landing);
  }

  /** A landing's text as landed, from its segment or its file of an earlier version. */
  async text(key: string): Promise<string | undefined> {
    const frame = await this.frameOf(key);
    if (frame) {
      try {
        return await readFrameText(frame.file, frame.ref);
      } catch (error) {
        // The run's segments were removed once it ended and its answers were loaded.
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
        this.indexes.delete(runFolderOfKey(key));
      }
    }
    const file = landingFile(this.dataDir, key);
    return existsSync(file) ? readFileSync(file, 'utf8') : undefined;
  }

  /**
   * Makes the run's answers that this process wrote durable (segment.ts): before its journals are,
   * and after the media files they name (media-store.ts).
   */
  async syncRun(runFolder: string): Promise<void> {
    await syncStoredMedia(this.dataDir);
    const run = this.writers.get(runFolder);
    if (!run) return;
    try {
      await run.writer.sync();
    } finally {
      // A failed segment is said once and then let go: once the disk takes writes again (a full
      // disk freed, a read-only folder made writable), the run's next answer begins a new segment.
      if (run.writer.failed && this.writers.get(runFolder) === run) {
        this.writers.delete(runFolder);
        clearTimeout(run.idle);
      }
    }
  }

  /** Forgets a run once its answers are loaded and its segments removed. */
  async forgetRun(runFolder: string): Promise<void> {
    const run = this.writers.get(runFolder);
    if (run) {
      this.writers.delete(runFolder);
      clearTimeout(run.idle);
      await run.writer.close();
    }
    this.indexes.delete(runFolder);
  }

  async close(): Promise<void> {
    for (const runFolder of [...this.writers.keys()]) await this.forgetRun(runFolder);
  }

  private writerOf(runFolder: string, runId: string): RunWriter {
    let run = this.writers.get(runFolder);
    if (!run || run.writer.failed || run.writer.bytes >= SEGMENT_BYTES) {
      if (run) void run.writer.close();
      run = { writer: new SegmentWriter(`${runSegmentFolder(this.dataDir, runFolder)}/${newSegmentFileName()}`, { run_id: runId }), idle: undefined };
      this.writers.set(runFolder, run);
    }
    clearTimeout(run.idle);
    const current = run;
    current.idle = setTimeout(() => {
      if (this.writers.get(runFolder) !== current) return;
      this.writers.delete(runFolder);
      void current.writer.close();
    }, IDLE_CLOSE_MS).unref();
    return current;
  }

  private indexOf(runFolder: string): RunIndex {
    const now = Date.now();
    let index = this.indexes.get(runFolder);
    if (!index) {
      index = { readTo: new Map(), frames: new Map(), usedAt: now };
      this.indexes.set(runFolder, index);
    }
    index.usedAt = now;
    // A run's index is built again from its files when next asked for, so one not asked for a
    // while is let go: a standing worker's memory follows the runs it serves now, not every run
    // it served (the loader, which removes a run's segments, is often another process).
    if (now - this.sweptAt >= IDLE_CLOSE_MS) {
      this.sweptAt = now;
      for (const [folder, other] of this.indexes) if (now - other.usedAt >= IDLE_CLOSE_MS) this.indexes.delete(folder);
    }
    return index;
  }

  /** How many runs' indexes this process holds: for tests of its memory. */
  get indexedRuns(): number {
    return this.indexes.size;
  }

  /** Where a key's frame is: from the index, or, when not there, after reading what the run's segments gained. */
  private async frameOf(key: string): Promise<IndexedFrame | undefined> {
    const runFolder = runFolderOfKey(key);
    const index = this.indexOf(runFolder);
    const known = index.frames.get(key);
    if (known) return known;
    await this.refresh(runFolder, index);
    return index.frames.get(key);
  }

  /** Reads the frames the run's segment files gained since they were last read (by any writer). */
  private async refresh(runFolder: string, index: RunIndex): Promise<void> {
    const folder = runSegmentFolder(this.dataDir, runFolder);
    let names: string[];
    try {
      names = await readdir(folder);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw error;
    }
    for (const name of names) {
      if (!parseSegmentFileName(name)) continue;
      const file = `${folder}/${name}`;
      const read = await readSegment(file, index.readTo.get(file) ?? 0);
      if (!read.header) continue;
      for (const ref of read.frames) if (!index.frames.has(ref.key)) index.frames.set(ref.key, { file, ref });
      index.readTo.set(file, read.end);
    }
  }
}

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
  await rm(`${landingRoot(dataDir)}/${runFolder}`, { recursive: true, force: true });
}
