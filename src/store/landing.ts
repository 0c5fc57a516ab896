/**
 * Landings: what a page is (its key, fixed by run, target and page, so a retry lands on the same key,
 * and its text), and where a data directory keeps it.
 *
 * A page lands in its run's segment (segment.ts): this process appends each run's landings to a
 * segment of its own for that run (`segments/<run>/<writer>-NNNNNN.seg`), so answers that arrive
 * together, from any of the run's works in this process, are written together, and made durable
 * together when any work of the run checkpoints (syncRun, called by the journal's sync). A landing
 * is found again by its key (a retried work reads back what an earlier attempt landed) through an
 * index of the run's segments, built from the files and kept up to date as they grow: its cost
 * follows the run's own answers, never the store's history (AnswerSegments).
 *
 * Landings of earlier versions, one immutable JSON file per page under `landing/`, are still found
 * by their key, and loads still read (and clear) them after an upgrade; this version writes none
 * (test/support/legacy-landing.ts writes them, to stand for an upgrade).
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { EndpointKey } from '../api-catalog/endpoints.js';
import type { CallFailure } from '../harvest/progress.js';
import { landingFile, listRunSegments, mediaLandingKey, pageLandingKey, runFolderOfKey, runSegmentFile, runStatusKey, segmentFileName } from './layout.js';
import { readFrameText, readSegment, SegmentWriter, type FrameRef } from './segment.js';
import { mayNeedRepair, repairValue, type TextRepair } from './text-repair.js';

/** The billed call behind a page. Free pages (a job's results) have none; the job is billed once. */
export interface LandedCall {
  request_id: string;
  units: number;
  credits: number;
  cache?: 'HIT' | 'MISS';
  job_id?: string;
}

export interface PageLanding {
  format: 1;
  kind: 'page';
  run_id: string;
  harvest: string;
  /** The target's key, e.g. `channel:tiktok:some_handle:videos`. */
  target: string;
  /** 1-based page number within the target in this run. */
  page: number;
  endpoint: EndpointKey;
  params: Record<string, string>;
  /** Request id of the answer this page came in (billed or not). */
  request_id: string;
  observed_at: string;
  call?: LandedCall;
  /** Items before this page in its listing, for search ranks. */
  rank_offset?: number;
  /** The list's next cursor and has_more, so a retried activity can resume from the landing alone. */
  next_cursor?: string;
  has_more?: boolean;
  /** Text of `data` that was not well-formed Unicode (a lone surrogate, a NUL), replaced by U+FFFD as it landed (text-repair.ts). */
  repairs?: TextRepair[];
  data: unknown;
}

/** A run's status, landed like a page so one loader writes every table. */
export interface RunLanding {
  format: 1;
  kind: 'run';
  run_id: string;
  harvest: string;
  /** Increases with each status landed for the run; the highest wins. */
  seq: number;
  status: string;
  started_at: string;
  finished_at?: string;
  budget_credits?: number;
  credits_spent?: number;
  items_landed?: number;
  error?: string;
  /** The enrichments the run's harvest asked for each listed item (`stats`, `comments`, …); on its final status. */
  enrichments?: string[];
  /** The run's enrichment calls that failed for good, on its final status: all of them, the latest say. */
  failed_calls?: Omit<CallFailure, 'target'>[];
  /** The run's answers set aside in quarantine/ (not loaded) when it ended: its status is then `completed_with_errors` at best. */
  answers_quarantined?: number;
  /** Text that was not well-formed Unicode, repaired as it landed (text-repair.ts). */
  repairs?: TextRepair[];
}

/**
 * A downloaded media file, framed among its run's answers (base64: a frame holds text), so it is
 * made durable with them in their group commit and loaded into the lake's `media_files`.
 */
export interface MediaLanding {
  format: 1;
  kind: 'media';
  run_id: string;
  sha256: string;
  mime_type: string;
  bytes: number;
  content_base64: string;
}

export type Landing = PageLanding | RunLanding | MediaLanding;

/** The landing's key (layout.ts's grammar): its identity in `loaded_landings`, and its path relative to the landing root. */
export function landingKey(landing: Landing): string {
  if (landing.kind === 'media') return mediaLandingKey(landing.run_id, landing.sha256);
  return landing.kind === 'run' ? runStatusKey(landing.run_id, landing.seq) : pageLandingKey(landing.run_id, landing.target, landing.page);
}

/**
 * A landing's text. A page's `data` is always its last member: the loader tells list pages from
 * resource pages by the bytes that end the file, without parsing it.
 *
 * Text that is not well-formed Unicode (a lone surrogate, a NUL, as an API or a proxy may send) is
 * repaired here, as it lands (text-repair.ts): the segment, the durable copy, then holds what the
 * loader can read, and a retried work reading its page back sees what the lake will. A page's
 * repairs are recorded in its `repairs` member (the lake's `text_repairs`).
 */
export function landingText(landing: Landing): string {
  const text = serializedLanding(landing);
  if (!mayNeedRepair(text)) return text;
  const repairs: TextRepair[] = [];
  const repaired = repairValue(landing, '', repairs) as Landing;
  if (repairs.length === 0) return text;
  // Paths from the landing's root: `.data[3].caption` is said `data[3].caption`.
  const recorded = [...(('repairs' in repaired && repaired.repairs) || []), ...repairs.map(({ path, replaced }) => ({ path: path.slice(1), replaced }))];
  return serializedLanding({ ...repaired, repairs: recorded } as Landing);
}

/** A landing as JSON, a page's `data` last. */
function serializedLanding(landing: Landing): string {
  if (landing.kind !== 'page') return JSON.stringify(landing);
  const { data, ...rest } = landing;
  return JSON.stringify({ ...rest, data });
}

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
  /**
   * This process's segment files begun while this index was kept: each of their frames was put in
   * `frames` as it was appended (land), so reading them back finds nothing new.
   */
  ownFiles: Set<string>;
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

  /**
   * Appends a landing to its run's segment; resolves with its key once its frame is written to the
   * file (readable by every process), not once it is durable: it is durable once syncRun returns.
   */
  async land(landing: Landing): Promise<string> {
    const key = landingKey(landing);
    const runFolder = runFolderOfKey(key);
    const index = this.indexOf(runFolder);
    const run = this.writerOf(runFolder, landing.run_id);
    // A segment nothing was appended to yet: every frame it will hold is put in this index as it lands.
    if (run.writer.bytes === 0) index.ownFiles.add(run.writer.file);
    const ref = await run.writer.append(key, landingText(landing));
    index.frames.set(key, { file: run.writer.file, ref });
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

  /** Makes the run's answers (and media files) that this process wrote durable (segment.ts), before its journals are. */
  async syncRun(runFolder: string): Promise<void> {
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
      run = { writer: new SegmentWriter(runSegmentFile(this.dataDir, runFolder, newSegmentFileName()), { run_id: runId }), idle: undefined };
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
      index = { readTo: new Map(), frames: new Map(), ownFiles: new Set(), usedAt: now };
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

  /**
   * Reads the frames the run's segment files gained since they were last read (by any writer).
   * The segment this process is writing is not read back while it is whole: every frame in it is
   * indexed already (land). Read back, it cost each page of a listing the frames all the run's
   * targets had landed since the last look, and a listing's next page waited for those reads behind
   * the pool's fsyncs. A segment that failed is read, whole frames and all, as any other writer's.
   */
  private async refresh(runFolder: string, index: RunIndex): Promise<void> {
    const current = this.writers.get(runFolder)?.writer;
    const writing = current && !current.failed && index.ownFiles.has(current.file) ? current.file : undefined;
    for (const { file } of await listRunSegments(this.dataDir, runFolder)) {
      if (file === writing) continue;
      const read = await readSegment(file, index.readTo.get(file) ?? 0);
      if (!read.header) continue;
      for (const ref of read.frames) if (!index.frames.has(ref.key)) index.frames.set(ref.key, { file, ref });
      index.readTo.set(file, read.end);
    }
  }
}

/** Every file under a folder, at any depth; none when the folder does not exist. */
export function filesUnder(root: string): string[] {
  if (!existsSync(root)) return [];
  const files: string[] = [];
  const walk = (directory: string) => {
    for (const entry of readdirSync(directory, { withFileTypes: true })) {
      const path = join(directory, entry.name);
      if (entry.isDirectory()) walk(path);
      else files.push(path);
    }
  };
  walk(root);
  return files;
}

/** A landing the loader cannot load (not JSON, an unknown endpoint, a bad content URL, …), and why. */
export interface UnloadableLanding {
  key: string;
  reason: string;
}

/** Why a landing's text is not JSON, in JSON.parse's words; undefined when it is JSON. */
export function notJsonReason(text: string): string | undefined {
  try {
    JSON.parse(text);
    return undefined;
  } catch (error) {
    return `not JSON: ${(error as Error).message}`;
  }
}
