import { existsSync, readFileSync, truncateSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { WebhookPayload } from '../api-catalog/resources.js';
import { FileWriteError, makeDurableDirectory, syncDirectory } from './durable-file.js';

/**
 * The receiver's durable record of deliveries, one JSON line each: `accepted` once an event is
 * on disk (fsynced, before the 2xx), `handled` once its handler finished. On restart, ids seen
 * before are still duplicates, and accepted events that were never handled are handed over again.
 */
export interface JournalEntry {
  kind: 'accepted' | 'handled';
  id: string;
  at: string;
  payload?: WebhookPayload;
}

export class EventJournal {
  /** The length of the file's whole lines, when an append that failed part-way could not be cut off. */
  private wholeLength: number | undefined;

  private constructor(
    private readonly path: string,
    private readonly file: FileHandle,
    readonly seenIds: Set<string>,
    readonly unhandled: Map<string, WebhookPayload>,
  ) {}

  static async open(path: string): Promise<EventJournal> {
    makeDurableDirectory(dirname(path));
    const seen = new Set<string>();
    const unhandled = new Map<string, WebhookPayload>();
    let text = '';
    try {
      text = readFileSync(path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    const lines = text.split('\n');
    for (const [index, line] of lines.entries()) {
      if (line.trim() === '') continue;
      let entry: JournalEntry;
      try {
        entry = JSON.parse(line) as JournalEntry;
      } catch {
        // A last line with no newline after it is an append a crash cut short: that delivery was
        // never acknowledged, so the sender will retry it. Cut it off so new lines start clean.
        if (index === lines.length - 1) {
          truncateSync(path, text.lastIndexOf('\n') + 1);
          break;
        }
        throw new Error(`${path}: line ${index + 1} is not a journal entry; the journal is damaged`);
      }
      seen.add(entry.id);
      if (entry.kind === 'accepted' && entry.payload) unhandled.set(entry.id, entry.payload);
      else unhandled.delete(entry.id);
    }
    const made = !existsSync(path);
    const journal = new EventJournal(path, await open(path, 'a'), seen, unhandled);
    // A new journal's name in its folder is on disk before its first line is acknowledged.
    if (made) syncDirectory(dirname(path));
    return journal;
  }

  /** Appends and fsyncs; only then may the receiver acknowledge the delivery. */
  async accept(id: string, payload: WebhookPayload): Promise<void> {
    this.seenIds.add(id);
    this.unhandled.set(id, payload);
    try {
      await this.append({ kind: 'accepted', id, at: new Date().toISOString(), payload });
    } catch (error) {
      // Not recorded, so not acknowledged: the sender's retry must not be taken for a duplicate.
      this.seenIds.delete(id);
      this.unhandled.delete(id);
      throw error;
    }
  }

  async handled(id: string): Promise<void> {
    this.unhandled.delete(id);
    await this.append({ kind: 'handled', id, at: new Date().toISOString() });
  }

  async close(): Promise<void> {
    await this.file.close();
  }

  /**
   * Appends a whole line and fsyncs it, or throws a FileWriteError naming the journal (the cause's
   * `code` kept). An append that fails part-way is cut off again, so the next line starts clean: a
   * part line glued to a later one would be a damaged journal at the next start.
   */
  private async append(entry: JournalEntry): Promise<void> {
    let length: number | undefined;
    try {
      if (this.wholeLength !== undefined) {
        await this.file.truncate(this.wholeLength);
        this.wholeLength = undefined;
      }
      length = (await this.file.stat()).size;
      await this.file.appendFile(`${JSON.stringify(entry)}\n`);
      await this.file.sync();
    } catch (error) {
      if (length !== undefined) {
        this.wholeLength = length;
        try {
          await this.file.truncate(length);
          this.wholeLength = undefined;
        } catch {
          // Cut off before the next append, which fails if it cannot be.
        }
      }
      throw new FileWriteError('webhook event journal', this.path, error);
    }
  }
}
