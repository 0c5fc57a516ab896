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

/**
 * The data directory's ledger: a file per UTC month every process of the machine appends to
 * (budgetLedgerFile), so what a process reads and keeps does not grow with the months it has run.
 * A period is a calendar month in its budget's time zone, which starts at most 14 hours before
 * the UTC month does and never after it: every record of the periods now open is in this UTC
 * month's file or the one before. A process replays those two, in that order, as every other
 * process does, so they all take the same decisions; when the UTC month turns it starts again
 * from the new two. A reservation's settlement goes into its reservation's file.
 */
export class FileBudgetLedger implements BudgetLedger {
  private window: LedgerWindow | undefined;
  /** The UTC month of each reservation this process made and has not settled: where its settlement goes. */
  private readonly monthOf = new Map<string, string>();
  /** UTC months whose file this process has made durable (its name synced into its folder). */
  private readonly durable = new Set<string>();
  /** Reads of the files, one at a time in this process (each applies what it read, in order). */
  private reading: Promise<unknown> = Promise.resolve();
  /**
   * Each month's file, opened for appending once and kept: an open and a close per record were two
   * more system calls on every billed call's path. Only this month's and the one before are kept.
   */
  private readonly appending = new Map<string, Promise<FileHandle>>();

  constructor(private readonly dataDir: string) {}

  async reserve(reservation: BudgetReservation): Promise<BudgetRefusal | undefined> {
    const at = Date.now();
    const month = utcMonth(at);
    this.monthOf.set(reservation.id, month);
    await this.append(month, { reserve: reservation.id, at, credits: reservation.credits, leaseUntil: at + reservation.leaseMs, periods: reservation.periods, ...(reservation.run ? { run: reservation.run } : {}) });
    const book = await this.catchUp(at);
    if (book.granted(reservation.id)) return undefined;
    this.monthOf.delete(reservation.id);
    return book.refused.get(reservation.id) ?? { budget: reservation.periods[0]?.budget ?? '', period: reservation.periods[0]?.period ?? '', limit: 0, spent: 0, reserved: 0, asked: reservation.credits };
  }

  async settle(id: string, credits: number): Promise<void> {
    await this.append(this.settledMonth(id), { settle: id, at: Date.now(), credits });
  }

  async release(id: string): Promise<void> {
    await this.append(this.settledMonth(id), { release: id, at: Date.now() });
  }

  async figures(atMs = Date.now()): Promise<PeriodFigures[]> {
    const now = Date.now();
    // A past month (`harvester budgets --at`) is read from its own two files, not kept.
    if (utcMonth(atMs) !== utcMonth(now)) return (await this.replay(new LedgerWindow(utcMonth(atMs)), false)).book.figures(atMs);
    return (await this.catchUp(now)).figures(atMs);
  }

  async close(): Promise<void> {
    await this.reading;
    const handles = [...this.appending.values()];
    this.appending.clear();
    await Promise.all(handles.map(async (handle) => (await handle.catch(() => undefined))?.close()));
  }

  private settledMonth(id: string): string {
    const month = this.monthOf.get(id) ?? utcMonth(Date.now());
    this.monthOf.delete(id);
    return month;
  }

  /**
   * Appends one record whole (one write of one line, O_APPEND): every process reads it from here on.
   * A reservation is synced before it returns, since its call goes on the wire next: lost in a power
   * cut, the call's charge would be missing from the budget. A settlement or a release is not: lost,
   * its reservation counts at its worst case once its lease ends, never less than was charged.
   */
  private async append(month: string, record: BudgetRecord): Promise<void> {
    const file = budgetLedgerFile(this.dataDir, month);
    if (!this.durable.has(month)) makeDurableDirectory(dirname(file));
    const handle = await this.appendHandle(month, file);
    await handle.write(`${JSON.stringify(record)}\n`);
    if ('reserve' in record) await handle.datasync();
    // Its name may be new: synced into its folder before any record in it counts.
    if (!this.durable.has(month)) syncDirectory(dirname(file));
    this.durable.add(month);
  }

  /** The month's file, open for appending (O_APPEND: each write goes whole to its end, whoever else appends). */
  private appendHandle(month: string, file: string): Promise<FileHandle> {
    let handle = this.appending.get(month);
    if (!handle) {
      handle = open(file, 'a');
      // A failed open is not kept: the next append tries again.
      handle.catch(() => this.appending.delete(month));
      this.appending.set(month, handle);
      // Months before last month rarely take a record (a settlement of a reservation made then): their files are reopened when they do.
      const oldest = monthBefore(utcMonth(Date.now()));
      for (const [kept, old] of this.appending) {
        if (kept >= oldest || kept === month) continue;
        this.appending.delete(kept);
        void old.then((opened) => opened.close()).catch(() => undefined);
      }
    }
    return handle;
  }

  /** The book of this UTC month's window, with what was appended since the last read applied. */
  private catchUp(nowMs: number): Promise<BudgetBook> {
    const read = this.reading.then(async () => {
      const month = utcMonth(nowMs);
      if (this.window?.month !== month) this.window = new LedgerWindow(month);
      return (await this.replay(this.window, true)).book;
    });
    this.reading = read.catch(() => undefined);
    return read;
  }

  /** Reads each file of the window past where it was read, and applies its whole lines in order. */
  private async replay(window: LedgerWindow, keep: boolean): Promise<LedgerWindow> {
    for (const part of window.parts) {
      const handle = await open(budgetLedgerFile(this.dataDir, part.month), 'r').catch((error: NodeJS.ErrnoException) => {
        if (error.code === 'ENOENT') return undefined;
        throw error;
      });
      if (!handle) continue;
      try {
        const { size } = await handle.stat();
        if (size <= part.offset) continue;
        const buffer = Buffer.alloc(size - part.offset);
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, part.offset);
        part.offset += keep ? bytesRead : 0;
        const bytes = Buffer.concat([part.partial, buffer.subarray(0, bytesRead)]);
        const end = bytes.lastIndexOf(0x0a) + 1;
        part.partial = keep ? bytes.subarray(end) : part.partial;
        for (const line of bytes.subarray(0, end).toString('utf8').split('\n')) {
          const record = parseRecord(line);
          if (record) window.book.apply(record);
        }
      } finally {
        await handle.close();
      }
    }
    return window;
  }
}

/** `YYYY-MM` of a time, in UTC: the ledger's file it is written in. */
export function utcMonth(atMs: number): string {
  return new Date(atMs).toISOString().slice(0, 7);
}

/** The UTC month before `month` (`YYYY-MM`). */
function monthBefore(month: string): string {
  const [year, number] = month.split('-').map(Number) as [number, number];
  return number === 1 ? `${year - 1}-12` : `${year}-${String(number - 1).padStart(2, '0')}`;
}

/** The two files a UTC month's decisions are read from (the month before first), and the book they make. */
class LedgerWindow {
  readonly book = new BudgetBook();
  readonly parts: { month: string; offset: number; partial: Buffer }[];

  constructor(readonly month: string) {
    this.parts = [monthBefore(month), month].map((part) => ({ month: part, offset: 0, partial: Buffer.alloc(0) }));
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
