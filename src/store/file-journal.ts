/**
 * The call journals of a data directory: a file per piece of work, `journal/<run>/<work>.ndjson`, in
 * the record format src/store/call-journal.ts describes (a JSON record, a tab, its CRC-32), its
 * claim in `<file>.owner`. The store's other backend keeps the same records in PostgreSQL
 * (src/store/shared/postgres-catalog.ts).
 */
import { closeSync, existsSync, fstatSync, fsyncSync, openSync, readdirSync, readFileSync, readSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { crc32 } from 'node:zlib';
import { RunJournalsEndedError, SupersededAttemptError, type JournalLine, type JournalLog, type JournalStore, type LateLogs } from './call-journal.js';
import { FileWriteError, makeDurableDirectory, syncDirectory, writeDurableFile, writeFully } from './durable-file.js';
import { isJournalFileName, journalClaimFile, journalFile, lateJournalFile, lateJournalRoot, lateRunFolder, lateRunIdFile, runJournalArchivingMark, runJournalEndedMark, runJournalFolder, workOfJournalFile } from './layout.js';


/** The journals of a data directory: a file per piece of work under `journal/<run>/`. */
export class FileJournals implements JournalStore {
  /**
   * `beforeSync` makes the run's landed answers durable before a journal of the run is: a
   * checkpoint never outlives the answers it covers (AnswerSegments, src/store/landing.ts).
   */
  constructor(
    private readonly dataDir: string,
    private readonly beforeSync?: (runId: string) => Promise<void>,
  ) {}

  journalLog(runId: string, workId: string): JournalLog {
    const beforeSync = this.beforeSync;
    return new FileJournalLog(journalFile(this.dataDir, runId, workId), beforeSync && (() => beforeSync(runId)), runJournalEndedMark(this.dataDir, runId));
  }

  /**
   * The run's ended mark is written (fsynced) first, then everything else in its folder removed:
   * a claim or an append that comes after finds the mark (a frozen worker's stale attempt), and
   * nothing recreates the journals. The mark is a few bytes a run.
   */
  async removeRunJournals(runIds: readonly string[]): Promise<void> {
    for (const runId of runIds) {
      const folder = runJournalFolder(this.dataDir, runId);
      const ended = runJournalEndedMark(this.dataDir, runId);
      writeDurableFile(ended, new Date().toISOString(), { what: 'ended run\'s journal mark' });
      for (const name of readdirSync(folder)) if (join(folder, name) !== ended) rmSync(join(folder, name), { recursive: true, force: true });
    }
  }

  lateLog(runId: string, workId: string): JournalLog {
    const file = lateJournalFile(this.dataDir, runId, workId);
    writeDurableFile(lateRunIdFile(dirname(file)), runId, { what: 'late records\' run' });
    return new FileJournalLog(file);
  }

  async lateLogs(): Promise<LateLogs[]> {
    const root = lateJournalRoot(this.dataDir);
    if (!existsSync(root)) return [];
    const found: LateLogs[] = [];
    for (const name of readdirSync(root)) {
      const folder = lateRunFolder(root, name);
      if (!existsSync(lateRunIdFile(folder))) continue;
      const runId = readFileSync(lateRunIdFile(folder), 'utf8');
      const logs = readdirSync(folder).filter(isJournalFileName).map((file) => new FileJournalLog(join(folder, file)));
      found.push({ runId, logs });
    }
    return found;
  }

  async removeLateLogs(runIds: readonly string[]): Promise<void> {
    for (const runId of runIds) rmSync(dirname(lateJournalFile(this.dataDir, runId, 'any')), { recursive: true, force: true });
  }

  async markArchiving(runIds: readonly string[]): Promise<void> {
    for (const runId of runIds) writeDurableFile(runJournalArchivingMark(this.dataDir, runId), new Date().toISOString(), { what: 'journal archiving mark' });
  }

  async archivingMarked(runIds: readonly string[]): Promise<Set<string>> {
    return new Set(runIds.filter((runId) => existsSync(runJournalArchivingMark(this.dataDir, runId))));
  }

  async runJournalLogs(runId: string): Promise<JournalLog[]> {
    const folder = runJournalFolder(this.dataDir, runId);
    if (!existsSync(folder)) return [];
    return readdirSync(folder)
      .filter(isJournalFileName)
      .map((name) => new FileJournalLog(join(folder, name)));
  }
}

/** Run folders in which this process made a journal file whose name no fsync of the folder has covered yet. */
const foldersWithNewNames = new Set<string>();

/** A journal in a file, in the format the module's comment describes; its claim in `<file>.owner`. */
export class FileJournalLog implements JournalLog {
  readonly work: string;
  private fd: number | undefined;
  /** The next record starts with a newline: the file may end in part of a record (a failed append). */
  private newlineFirst = false;
  /** Records appended since the last fsync: a work's last checkpoint and its close both sync, the second with nothing new. */
  private unsynced = false;
  /** The attempt that claimed the journal through this log: only while it holds the claim are records appended. */
  private claimed: number | undefined;

  constructor(
    private readonly file: string,
    private readonly beforeSync?: () => Promise<void>,
    /** The run's ended mark (FileJournals.removeRunJournals): present, no claim is made and no record appended. */
    private readonly endedMark?: string,
  ) {
    this.work = workOfJournalFile(file);
  }

  async records(): Promise<JournalLine[]> {
    if (!existsSync(this.file)) return [];
    const lines: JournalLine[] = [];
    for (const text of readFileSync(this.file, 'utf8').split('\n')) {
      // A cut record is skipped: exact, as the module's comment explains.
      if (text === '') continue;
      const line = parseRecord(text);
      if (line !== undefined) lines.push(line);
    }
    return lines;
  }

  /**
   * Not fsynced: the claim fences off an earlier attempt still running beside this one, on this
   * machine (a data directory is one machine's), and a machine crash ends both. Two fsyncs per
   * work were 12 of the demo's 77. An attempt older than the claim's, or of an ended run, claims
   * nothing: a frozen worker's stale task, woken, must not take the journal back. (Read, then
   * written by rename: two attempts claiming in the same instant could both pass the read; the
   * later attempt's next fence then fails and its retry claims again, above both.)
   */
  async claim(attempt: number): Promise<void> {
    if (this.ended()) throw new SupersededAttemptError(`attempt ${attempt} of work ${this.work} belongs to a run that is over (its journals were removed): it claims nothing`);
    const owner = await this.owner();
    if (owner !== undefined && owner > attempt) throw new SupersededAttemptError(`attempt ${attempt} of work ${this.work} was superseded by attempt ${owner}: it claims nothing`);
    // The run's journal folder may be made here, before any record: its name is synced in its
    // parent as it is made (the records' own sync covers only the names inside it).
    makeDurableDirectory(dirname(this.file));
    writeDurableFile(journalClaimFile(this.file), String(attempt), { what: 'journal claim', durable: false });
    this.claimed = attempt;
  }

  async owner(): Promise<number | undefined> {
    const file = journalClaimFile(this.file);
    return existsSync(file) ? Number(readFileSync(file, 'utf8')) : undefined;
  }

  /**
   * Writes a record whole, or throws a FileWriteError naming the journal (the cause's `code`
   * kept).
   */
  async append(line: JournalLine): Promise<void> {
    // Checked at every record, not only at the open: a woken worker may hold the file open after
    // its removal, and what it appended there would be lost.
    if (this.ended()) throw new RunJournalsEndedError(`the journals of work ${this.work}'s run were removed (the run is over): ${this.file} takes no more records`);
    if (this.claimed !== undefined) {
      const owner = await this.owner();
      if (owner !== this.claimed) throw new SupersededAttemptError(`attempt ${this.claimed} of work ${this.work} lost its claim (to ${owner === undefined ? 'the run\'s end' : `attempt ${owner}`}): it appends nothing to ${this.file}`);
    }
    try {
      if (this.fd === undefined) {
        // A run's journal folder, new in journal/, is a new name there: its parents are synced as it is made.
        makeDurableDirectory(dirname(this.file));
        const made = !existsSync(this.file);
        this.fd = openSync(this.file, 'a+');
        if (made) foldersWithNewNames.add(dirname(this.file));
        this.newlineFirst = true;
        this.newlineFirst = !endsWithNewline(this.fd);
      }
      const json = JSON.stringify(line);
      const record = `${this.newlineFirst ? '\n' : ''}${json}\t${checksum(json)}\n`;
      // Until this record is whole, the file may end in part of it.
      this.newlineFirst = true;
      this.unsynced = true;
      writeFully(this.fd, Buffer.from(record));
      this.newlineFirst = false;
    } catch (error) {
      throw new FileWriteError('call journal', this.file, error);
    }
  }

  /** Fsyncs the records appended so far; throws a FileWriteError naming the journal. */
  async sync(): Promise<void> {
    await this.beforeSync?.();
    if (this.fd === undefined || !this.unsynced) return;
    try {
      fsyncSync(this.fd);
      this.unsynced = false;
      // The journal's name, new in its run's folder: one fsync of the folder covers every journal
      // of the run this process made before it.
      const folder = dirname(this.file);
      if (foldersWithNewNames.delete(folder)) {
        try {
          syncDirectory(folder);
        } catch (error) {
          foldersWithNewNames.add(folder);
          throw error;
        }
      }
    } catch (error) {
      throw new FileWriteError('call journal', this.file, error);
    }
  }

  async close(): Promise<void> {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }

  private ended(): boolean {
    return this.endedMark !== undefined && existsSync(this.endedMark);
  }
}

function checksum(json: string): string {
  return crc32(json).toString(16).padStart(8, '0');
}

/** Whether a file open for appending is empty or ends with a newline. */
function endsWithNewline(fd: number): boolean {
  const size = fstatSync(fd).size;
  if (size === 0) return true;
  const last = Buffer.alloc(1);
  return readSync(fd, last, 0, 1, size - 1) === 1 && last[0] === 0x0a;
}

const CHECKSUM = /\t([0-9a-f]{8})$/;

/**
 * A journal line's record, or undefined when the line is not a whole record (see the module's
 * comment): `<JSON>\t<checksum>` whose checksum matches, or a JSON object without a checksum (an
 * earlier version's line). A record glued after a cut one is found by its checksum.
 */
function parseRecord(text: string): JournalLine | undefined {
  const checked = CHECKSUM.exec(text);
  if (!checked) return text.includes('\t') ? undefined : asRecord(text);
  const json = text.slice(0, checked.index);
  if (checksum(json) === checked[1]) return asRecord(json);
  // A record glued after part of another: it starts at one of the line's `{`.
  for (let start = json.indexOf('{', 1); start > 0; start = json.indexOf('{', start + 1)) {
    if (checksum(json.slice(start)) === checked[1]) return asRecord(json.slice(start));
  }
  return undefined;
}

function asRecord(json: string): JournalLine | undefined {
  try {
    const value: unknown = JSON.parse(json);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as JournalLine) : undefined;
  } catch {
    return undefined;
  }
}
