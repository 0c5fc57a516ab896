/**
 * Answer segments: append-only files that hold many landed answers each, in the spirit of Kafka's
 * log segments and PostgreSQL's WAL. A segment begins with one header line naming its format and
 * its run; then frames, each `<length: u32 LE><CRC-32 of the payload: u32 LE><payload>`, where the
 * payload is `<landing key>\n<the landing's JSON, one line>`.
 *
 * Frames are written by a SegmentWriter, asynchronously (the event loop never waits on the disk),
 * in groups: every append that arrives while a write is under way joins the next group, written
 * with one writev. An append resolves once the kernel has its frame: a killed process loses none of
 * it. `sync` makes every frame written so far outlive a machine crash, with one fdatasync for all
 * of them (group commit): the harvest calls it before it checkpoints a work's position (through the
 * journal's sync), so a checkpoint never covers an answer that a machine crash could take back,
 * and a run makes one fdatasync per checkpoint, not one per answer.
 *
 * A reader (readFrames) takes frames in order up to the first one that is cut short or whose
 * checksum does not match: a torn tail, left by a process killed mid-write or a full disk. A writer
 * that fails is never written again (its owner opens a new segment), so a torn frame is always a
 * segment's last; its call was never settled as landed, so the journal counts it as the call in
 * flight it was (re-bought by a retry, or counted as lost).
 */
import { open, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { crc32 } from 'node:zlib';
import { FileWriteError, makeDurableDirectory, syncDirectory } from './durable-file.js';

const MAGIC = 'social-harvester segment 1';
const FRAME_HEADER_BYTES = 8;
const NEWLINE = 0x0a;

/** A segment's header: its format and the run whose answers it holds. */
export interface SegmentHeader {
  run_id: string;
}

export function segmentHeaderText(header: SegmentHeader): string {
  return `${MAGIC}\t${JSON.stringify(header)}\n`;
}

/** The header of a segment's bytes, and where its frames start; undefined when it has no whole header. */
export function parseSegmentHeader(bytes: Buffer): { header: SegmentHeader; framesStart: number } | undefined {
  const end = bytes.indexOf(NEWLINE);
  if (end === -1) return undefined;
  const line = bytes.subarray(0, end).toString('utf8');
  const tab = line.indexOf('\t');
  if (tab === -1 || line.slice(0, tab) !== MAGIC) return undefined;
  try {
    const header = JSON.parse(line.slice(tab + 1)) as SegmentHeader;
    return typeof header.run_id === 'string' ? { header, framesStart: end + 1 } : undefined;
  } catch {
    return undefined;
  }
}

/** One frame's bytes: its length and checksum, then the key and the landing's text. */
export function frameOf(key: string, text: string): Buffer {
  const payload = Buffer.from(`${key}\n${text}`, 'utf8');
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length);
  frame.writeUInt32LE(payload.length, 0);
  frame.writeUInt32LE(crc32(payload), 4);
  payload.copy(frame, FRAME_HEADER_BYTES);
  return frame;
}

/** A whole frame found in a segment: its landing key, and where its landing's text lies in the file. */
export interface FrameRef {
  key: string;
  /** Byte offset of the landing's text (after the key) in the segment file. */
  textOffset: number;
  textLength: number;
  /** Byte offset just past the frame: where the next one starts. */
  end: number;
}

export interface SegmentRead {
  /** Undefined when the file has no whole header yet (or is not a segment). */
  header: SegmentHeader | undefined;
  frames: FrameRef[];
  /** Where the whole frames read end: the offset a later read resumes from. */
  end: number;
  /** Bytes after the last whole frame that make no whole frame: a torn tail, or a group being written. */
  tornBytes: number;
}

/**
 * The whole frames in `bytes`, which hold a segment file from its offset `base` on, up to the first
 * cut or corrupt one.
 */
export function framesIn(bytes: Buffer, base: number): { frames: FrameRef[]; end: number; tornBytes: number } {
  let offset = 0;
  const frames: FrameRef[] = [];
  while (offset + FRAME_HEADER_BYTES <= bytes.length) {
    const length = bytes.readUInt32LE(offset);
    const payloadStart = offset + FRAME_HEADER_BYTES;
    if (payloadStart + length > bytes.length) break;
    const payload = bytes.subarray(payloadStart, payloadStart + length);
    if (crc32(payload) !== bytes.readUInt32LE(offset + 4)) break;
    const keyEnd = payload.indexOf(NEWLINE);
    if (keyEnd <= 0) break;
    frames.push({ key: payload.subarray(0, keyEnd).toString('utf8'), textOffset: base + payloadStart + keyEnd + 1, textLength: length - keyEnd - 1, end: base + payloadStart + length });
    offset = payloadStart + length;
  }
  return { frames, end: base + offset, tornBytes: bytes.length - offset };
}

/** Longest header line read: a run id is short. */
const HEADER_READ_BYTES = 4096;

/**
 * A segment file's header and its whole frames from `from` (its first frame when 0), read without
 * blocking the event loop; a file that is gone has none.
 */
export async function readSegment(file: string, from = 0): Promise<SegmentRead> {
  let handle: FileHandle;
  try {
    handle = await open(file, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { header: undefined, frames: [], end: 0, tornBytes: 0 };
    throw error;
  }
  try {
    const size = (await handle.stat()).size;
    const head = await readAt(handle, 0, Math.min(size, HEADER_READ_BYTES));
    const parsed = parseSegmentHeader(head);
    if (!parsed) return { header: undefined, frames: [], end: 0, tornBytes: size };
    const start = Math.max(from, parsed.framesStart);
    const { frames, end, tornBytes } = framesIn(await readAt(handle, start, size - start), start);
    return { header: parsed.header, frames, end, tornBytes };
  } finally {
    await handle.close();
  }
}

/** A landing's text at a frame, read from its segment. */
export async function readFrameText(file: string, ref: Pick<FrameRef, 'textOffset' | 'textLength'>): Promise<string> {
  const handle = await open(file, 'r');
  try {
    return (await readAt(handle, ref.textOffset, ref.textLength)).toString('utf8');
  } finally {
    await handle.close();
  }
}

async function readAt(handle: FileHandle, position: number, length: number): Promise<Buffer> {
  const buffer = Buffer.allocUnsafe(Math.max(0, length));
  let read = 0;
  while (read < length) {
    const { bytesRead } = await handle.read(buffer, read, length - read, position + read);
    if (bytesRead === 0) break;
    read += bytesRead;
  }
  return buffer.subarray(0, read);
}

interface WaitingAppend {
  frame: Buffer;
  key: string;
  resolve: (ref: FrameRef) => void;
  reject: (error: Error) => void;
}

/**
 * Appends frames to one segment file, in groups, each made durable by one fdatasync. Written here,
 * not taken from a library: what is needed is Node's own FileHandle (writev, datasync) and a queue
 * of a few lines; the log libraries on npm (pino's sonic-boom, say) do not say when a line is durable.
 */
export class SegmentWriter {
  private handle: FileHandle | undefined;
  private waiting: WaitingAppend[] = [];
  private flushing: Promise<void> | undefined;
  private failure: Error | undefined;
  /** Bytes in the file, header included, once every waiting frame is written. */
  private size = 0;
  /** Bytes written to the file so far: where the next group starts. */
  private written = 0;
  /** Groups written, frames in them, and fdatasyncs made. */
  groups = 0;
  frames = 0;
  syncs = 0;
  /** Frames written since the last fdatasync. */
  private unsynced = false;

  constructor(
    readonly file: string,
    private readonly header: SegmentHeader,
  ) {}

  /** Bytes the segment will hold once its waiting frames are written: for rolling to a new one. */
  get bytes(): number {
    return this.size;
  }

  /** Whether an append failed: the segment may end in a torn frame and takes no more. */
  get failed(): boolean {
    return this.failure !== undefined;
  }

  /** Appends a landing's frame; resolves once the kernel has it, with where its text lies. */
  append(key: string, text: string): Promise<FrameRef> {
    if (this.failure) return Promise.reject(this.failure);
    const frame = frameOf(key, text);
    this.size += frame.length;
    return new Promise<FrameRef>((resolve, reject) => {
      this.waiting.push({ frame, key, resolve, reject });
      this.flushing ??= this.flush();
    });
  }

  /**
   * Waits for every frame appended so far to be written to the file (or failed): written, not yet
   * durable: sync makes them durable (and flush, when a write fails, tries once to sync what was written before it).
   */
  async drain(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  /** Makes every frame written so far durable, with one fdatasync; throws naming the segment. */
  async sync(): Promise<void> {
    await this.drain();
    // A failed segment synced what it had when it failed; if it could not, its answers are not durable.
    if (this.failure) {
      if (this.unsynced) throw this.failure;
      return;
    }
    if (!this.unsynced || !this.handle) return;
    this.unsynced = false;
    try {
      await this.handle.datasync();
      this.syncs++;
    } catch (error) {
      this.unsynced = true;
      throw new FileWriteError('landing segment', this.file, error);
    }
  }

  async close(): Promise<void> {
    await this.sync().catch(() => undefined);
    await this.handle?.close().catch(() => undefined);
    this.handle = undefined;
  }

  private async flush(): Promise<void> {
    try {
      while (this.waiting.length > 0) {
        const group = this.waiting;
        this.waiting = [];
        try {
          await this.writeGroup(group);
        } catch (error) {
          this.failure = new FileWriteError('landing segment', this.file, error);
          for (const append of [...group, ...this.waiting]) append.reject(this.failure);
          this.waiting = [];
          // The frames written before the failure were answered as landed: they are made durable
          // now, if the disk lets them, since this segment takes no more (nor a later sync).
          if (this.unsynced && this.handle) {
            await this.handle.datasync().then(
              () => {
                this.unsynced = false;
                this.syncs++;
              },
              () => undefined,
            );
          }
          await this.handle?.close().catch(() => undefined);
          this.handle = undefined;
        }
      }
    } finally {
      this.flushing = undefined;
    }
  }

  private async writeGroup(group: WaitingAppend[]): Promise<void> {
    const buffers = group.map((append) => append.frame);
    await this.open();
    let position = this.written;
    const refs = group.map((append) => {
      const keyBytes = Buffer.byteLength(append.key) + 1;
      const ref = { key: append.key, textOffset: position + FRAME_HEADER_BYTES + keyBytes, textLength: append.frame.length - FRAME_HEADER_BYTES - keyBytes, end: position + append.frame.length };
      position = ref.end;
      return ref;
    });
    await writeAll(this.handle as FileHandle, buffers);
    this.written = position;
    this.unsynced = true;
    this.groups++;
    this.frames += group.length;
    group.forEach((append, index) => append.resolve(refs[index] as FrameRef));
  }

  /** Opens the file on the first group, writing its header. */
  private async open(): Promise<void> {
    if (this.handle) return;
    // The run's folder, when new, is a name in segments/ that must outlive a crash as the segment's does.
    makeDurableDirectory(dirname(this.file));
    const handle = await open(this.file, 'wx');
    this.handle = handle;
    const header = Buffer.from(segmentHeaderText(this.header), 'utf8');
    await writeAll(handle, [header]);
    // The segment's name must outlive a machine crash as its frames do: its folder is synced once.
    syncDirectory(dirname(this.file));
    this.size += header.length;
    this.written = header.length;
  }
}

/**
 * Writes every buffer, continuing short writes. A write that stores nothing is taken as a full
 * disk (ENOSPC), as coreutils' full_write does: looping on it would never end.
 */
async function writeAll(handle: FileHandle, buffers: Buffer[]): Promise<void> {
  let rest = buffers.filter((buffer) => buffer.length > 0);
  while (rest.length > 0) {
    const { bytesWritten } = await handle.writev(rest);
    if (!(bytesWritten > 0)) throw Object.assign(new Error('ENOSPC: write stored nothing, writev'), { code: 'ENOSPC', syscall: 'writev' });
    let skip = bytesWritten;
    while (rest.length > 0 && skip >= (rest[0] as Buffer).length) skip -= (rest.shift() as Buffer).length;
    if (skip > 0 && rest.length > 0) rest = [(rest[0] as Buffer).subarray(skip), ...rest.slice(1)];
  }
}
