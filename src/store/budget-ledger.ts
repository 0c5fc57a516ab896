/**
 * The ledger of the budgets across runs (src/harvest/budgets.ts): every call of a run that a budget
 * covers is reserved here at its worst case right before it is sent, and settled at what the API
 * charged. Two backends behind `BudgetLedger`: a file in the data directory (here, for every
 * process of one machine) and PostgreSQL (shared/postgres-budget-ledger.ts, for many machines).
 *
 * The file: one JSON record a line, appended with O_APPEND and fdatasynced before the call is
 * sent. Its order is the order of decisions: a process appends its reservation, syncs it, then
 * reads the file up to its end and replays it (BudgetBook), and the reservation is granted if,
 * with every record before it, each of its periods had room. Every process replays the same file
 * the same way, so two processes never both take the same last credits. Written by hand rather
 * than with a lock file: a lock held by a worker that was SIGKILLed would need stealing, with its
 * own races, while an append of one line is atomic on a local file system and leaves nothing held.
 * A record torn by a machine crash is one line no reader parses: all of them skip it alike (a
 * reservation lost so was not granted, and its writer, reading the same file, sees that).
 */
import { randomUUID } from 'node:crypto';
import { open, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { BudgetBook, periodsAt, type BudgetPeriod, type CrossRunBudget, type BudgetRecord, type BudgetRefusal, type PeriodFigures } from '../harvest/budgets.js';
import { makeDurableDirectory, syncDirectory } from './durable-file.js';
import { budgetLedgerFile } from './layout.js';

/** One call's reservation: its id (unique in the ledger), its worst case, its periods and its lease. */
export interface BudgetReservation {
  id: string;
  credits: number;
  periods: BudgetPeriod[];
  /** How long it is held if never settled: past it, it counts as spent at its worst case. */
  leaseMs: number;
  /** The run it is for: said in the ledger, for whoever reads it. */
  run?: string;
}

export interface BudgetLedger {
  /**
   * Reserves `credits` against every period of the reservation, all or none, durably before it
   * returns; the refusal (which budget, its figures) when one of them cannot take them.
   */
  reserve(reservation: BudgetReservation): Promise<BudgetRefusal | undefined>;
  /** Settles a reservation at what the API charged: once; a second settlement counts nothing. */
  settle(id: string, credits: number): Promise<void>;
  /** Releases a reservation whose call the API cannot have charged (it was never sent, or refused). */
  release(id: string): Promise<void>;
  /** Every period's figures now (or at `atMs`). */
  figures(atMs?: number): Promise<PeriodFigures[]>;
  close(): Promise<void>;
}

/** The data directory's ledger: one file every process of the machine appends to. */
export class FileBudgetLedger implements BudgetLedger {
  private readonly file: string;
  private handle: Promise<FileHandle> | undefined;
  private readonly book = new BudgetBook();
  /** How far the file has been replayed into `book`, and the part of a line read past it. */
  private offset = 0;
  /** Bytes past the last newline read: kept as bytes, so a character cut by the read's end is whole at the next. */
  private partial = Buffer.alloc(0);
  /** Reads of the file, one at a time in this process (each applies what it read, in order). */
  private reading: Promise<unknown> = Promise.resolve();

  constructor(dataDir: string) {
    this.file = budgetLedgerFile(dataDir);
  }

  async reserve(reservation: BudgetReservation): Promise<BudgetRefusal | undefined> {
    const at = Date.now();
    await this.append({ reserve: reservation.id, at, credits: reservation.credits, leaseUntil: at + reservation.leaseMs, periods: reservation.periods, ...(reservation.run ? { run: reservation.run } : {}) });
    await this.catchUp();
    if (this.book.granted(reservation.id)) return undefined;
    return this.book.refused.get(reservation.id) ?? { budget: reservation.periods[0]?.budget ?? '', period: reservation.periods[0]?.period ?? '', limit: 0, spent: 0, reserved: 0, asked: reservation.credits };
  }

  async settle(id: string, credits: number): Promise<void> {
    await this.append({ settle: id, at: Date.now(), credits });
  }

  async release(id: string): Promise<void> {
    await this.append({ release: id, at: Date.now() });
  }

  async figures(atMs = Date.now()): Promise<PeriodFigures[]> {
    await this.catchUp();
    return this.book.figures(atMs);
  }

  async close(): Promise<void> {
    const handle = this.handle;
    this.handle = undefined;
    if (handle) await (await handle).close();
  }

  /** The file, opened for appending (made durably the first time: its folder and its name synced). */
  private opened(): Promise<FileHandle> {
    this.handle ??= (async () => {
      makeDurableDirectory(dirname(this.file));
      const handle = await open(this.file, 'a+');
      // Its name may be new: synced into its folder before any record in it counts.
      syncDirectory(dirname(this.file));
      return handle;
    })();
    return this.handle;
  }

  /** Appends one record whole (one write of one line) and syncs it: it counts from here on. */
  private async append(record: BudgetRecord): Promise<void> {
    const handle = await this.opened();
    await handle.write(`${JSON.stringify(record)}\n`);
    await handle.datasync();
  }

  /** Reads what was appended since the last read, and applies its whole lines in order. */
  private catchUp(): Promise<void> {
    const read = this.reading.then(async () => {
      const handle = await this.opened();
      const { size } = await handle.stat();
      if (size <= this.offset) return;
      const buffer = Buffer.alloc(size - this.offset);
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, this.offset);
      this.offset += bytesRead;
      const bytes = Buffer.concat([this.partial, buffer.subarray(0, bytesRead)]);
      const end = bytes.lastIndexOf(0x0a) + 1;
      this.partial = bytes.subarray(end);
      for (const line of bytes.subarray(0, end).toString('utf8').split('\n')) {
        const record = parseRecord(line);
        if (record) this.book.apply(record);
      }
    });
    this.reading = read.catch(() => undefined);
    return read;
  }
}

/** A record, or undefined for a line no reader can take (torn by a machine crash): every reader skips it alike. */
function parseRecord(line: string): BudgetRecord | undefined {
  try {
    const record = JSON.parse(line) as BudgetRecord;
    return typeof record === 'object' && record !== null && typeof record.at === 'number' ? record : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The budgets across runs that one run's calls are reserved against, with the ledger that holds
 * them: what a work frame gives its calls (CallJournal.budgets). Each reservation is named for the
 * run and the call's landing key, and made unique, so a call made again has a reservation of its own.
 */
export class RunBudgets {
  constructor(
    private readonly ledger: BudgetLedger,
    readonly runId: string,
    readonly budgets: readonly CrossRunBudget[],
    /** How long a reservation is held unsettled: past the call's deadline, with room for its settlement. */
    readonly leaseMs: number,
  ) {}

  /** Reserves `credits` against every budget's period now: the reservation's id, or the refusal. */
  async reserve(key: string, credits: number): Promise<{ id: string } | { refusal: BudgetRefusal }> {
    const id = `${this.runId} ${key} ${randomUUID()}`;
    const refusal = await this.ledger.reserve({ id, credits, periods: periodsAt(this.budgets, Date.now()), leaseMs: this.leaseMs, run: this.runId });
    return refusal ? { refusal } : { id };
  }

  settle(id: string, credits: number): Promise<void> {
    return this.ledger.settle(id, credits);
  }

  release(id: string): Promise<void> {
    return this.ledger.release(id);
  }
}
