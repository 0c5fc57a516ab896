/**
 * The call journals of runs over for good, copied into the lake (`call_journal`) by the load that
 * clears their answers, then removed from the store: the data directory keeps the journals of open
 * work only (the demo's were 540 KB beside a lake of 1.1 MB), and a run's ledger stays queryable
 * beside the rows it paid for.
 *
 * The copy commits in the lake, the removal follows in the store: a load killed between the two
 * leaves journals the lake already has. So the runs are marked (durably, in the store) before the
 * copy commits, and a load that finds a run marked replaces the run's rows instead of adding them.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import type { DuckDBConnection } from '@duckdb/node-api';
import { journalArchiveFile, journalArchiveFolder } from '../store/layout.js';
import type { Store } from '../store/store.js';
import { CallJournal, type JournalLine, type JournalLog, type LateLogs } from '../store/call-journal.js';
import { sqlString } from './duckdb.js';
import { queryWarehouse } from './query.js';

/**
 * Copies the journals of these ended runs into the lake, within the caller's transaction (the load's
 * last batch, whose commit it then rides); returns the runs that had any.
 */
export async function archiveJournals(connection: DuckDBConnection, dataDir: string, store: Store, runIds: readonly string[]): Promise<string[]> {
  const lines: string[] = [];
  const archived: string[] = [];
  for (const runId of runIds) {
    const logs = await store.journals.runJournalLogs(runId);
    if (logs.length === 0) continue;
    archived.push(runId);
    for (const log of logs) {
      const records = await log.records();
      await log.close();
      for (const [seq, record] of records.entries()) lines.push(JSON.stringify({ run_id: runId, work: log.work, seq, record }));
    }
  }
  if (archived.length === 0) return [];
  const marked = await store.journals.archivingMarked(archived);
  await store.journals.markArchiving(archived.filter((runId) => !marked.has(runId)));
  const folder = journalArchiveFolder(dataDir);
  mkdirSync(folder, { recursive: true });
  const file = journalArchiveFile(dataDir, 'records');
  try {
    writeFileSync(file, lines.length > 0 ? `${lines.join('\n')}\n` : '');
    if (marked.size > 0) await connection.run(`DELETE FROM call_journal WHERE run_id IN (${[...marked].map(sqlString).join(', ')})`);
    if (lines.length > 0) {
      await connection.run(`INSERT INTO call_journal SELECT run_id, work, seq, record, now()
        FROM read_json(${sqlString(file)}, format = 'newline_delimited', columns = {run_id: 'VARCHAR', work: 'VARCHAR', seq: 'BIGINT', record: 'JSON'})`);
    }
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
  return archived;
}

/**
 * Where a run's late records are numbered in `call_journal`: after any journal's own records (a
 * work journals far fewer), so they read back after the records they settle.
 */
const LATE_SEQ = 1_000_000_000;

/**
 * Copies the late records of ended runs (what an attempt that lost its claim, its worker frozen, then
 * woken, learnt of its calls that were on the wire: a charge, or a call its fence kept from being
 * sent) into the lake, once the run's journals are there, within
 * the caller's transaction, and corrects each run's `credits_spent` by what they change in its
 * journals' totals (replayed by the journal's own arithmetic, CallJournal): exact, whatever the
 * records are. `credits_late` says by how much the figure was corrected. The late records are read
 * whole each time until removed, so a load killed after its commit and before the removal sets the
 * same rows and the same correction again. Returns the runs whose late records are in the lake:
 * the caller removes them from the store once committed.
 */
export async function archiveLateRecords(connection: DuckDBConnection, dataDir: string, late: readonly LateLogs[]): Promise<string[]> {
  if (late.length === 0) return [];
  // A run still going (its superseded attempt's records came first) waits: its journals, and the
  // figures its late records correct, are not in the lake yet.
  const archivedRuns = await connection.runAndReadAll(`SELECT DISTINCT run_id FROM call_journal WHERE seq < ${LATE_SEQ} AND run_id IN (${late.map(({ runId }) => sqlString(runId)).join(', ')})`);
  const ended = new Set((archivedRuns.getRows() as [string][]).map(([runId]) => runId));
  const lines: string[] = [];
  const corrections = new Map<string, number>();
  for (const { runId, logs } of late) {
    if (!ended.has(runId)) continue;
    const archived = await archivedRecords(connection, runId);
    let correction = 0;
    for (const log of logs) {
      const records = await log.records();
      await log.close();
      correction += await lateCorrection(archived.get(log.work) ?? [], records);
      for (const [index, record] of records.entries()) lines.push(JSON.stringify({ run_id: runId, work: log.work, seq: LATE_SEQ + index, record }));
    }
    corrections.set(runId, correction);
  }
  const runs = [...corrections.keys()];
  if (runs.length === 0) return [];
  const folder = journalArchiveFolder(dataDir);
  mkdirSync(folder, { recursive: true });
  const file = journalArchiveFile(dataDir, 'late');
  try {
    writeFileSync(file, lines.length > 0 ? `${lines.join('\n')}\n` : '');
    await connection.run(`DELETE FROM call_journal WHERE seq >= ${LATE_SEQ} AND run_id IN (${runs.map(sqlString).join(', ')})`);
    if (lines.length > 0) {
      await connection.run(`INSERT INTO call_journal SELECT run_id, work, seq, record, now()
        FROM read_json(${sqlString(file)}, format = 'newline_delimited', columns = {run_id: 'VARCHAR', work: 'VARCHAR', seq: 'BIGINT', record: 'JSON'})`);
    }
    for (const [runId, correction] of corrections) await correctRunFigure(connection, runId, correction);
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
  return runs;
}

/**
 * The corrections of every run whose late records the lake keeps, made again on `harvest_runs` just
 * derived again from the runs' statuses (rederive.ts: a rebuild, a repair), within the caller's
 * transaction. A status says what its run knew when it ended; the late records came after it, and
 * without them a rebuilt run's `credits_spent` was its status's figure again, not the API's ledger.
 */
export async function correctRunsByLateRecords(connection: DuckDBConnection): Promise<void> {
  const reader = await connection.runAndReadAll(`SELECT DISTINCT run_id FROM call_journal WHERE seq >= ${LATE_SEQ}`);
  for (const [runId] of reader.getRows() as [string][]) {
    const archived = await archivedRecords(connection, runId);
    let correction = 0;
    for (const [work, records] of await archivedRecords(connection, runId, 'late')) correction += await lateCorrection(archived.get(work) ?? [], records);
    await correctRunFigure(connection, runId, correction);
  }
}

/** What a work's late records change in its journal's total: the correction of its run's figure. */
async function lateCorrection(before: JournalLine[], late: JournalLine[]): Promise<number> {
  return (await totalCredits([...before, ...late])) - (await totalCredits(before));
}

/** A run's figure corrected by its late records; `credits_late` says by how much, and replaces an earlier correction. */
async function correctRunFigure(connection: DuckDBConnection, runId: string, correction: number): Promise<void> {
  await connection.run(`UPDATE harvest_runs SET credits_spent = credits_spent - coalesce(credits_late, 0) + ${correction}, credits_late = ${correction} WHERE run_id = ${sqlString(runId)}`);
}

/** A run's journal records in the lake, by work: its journals' own (before its late ones), or its late ones. */
async function archivedRecords(connection: DuckDBConnection, runId: string, which: 'own' | 'late' = 'own'): Promise<Map<string, JournalLine[]>> {
  const reader = await connection.runAndReadAll(
    `SELECT work, record::VARCHAR AS record FROM call_journal WHERE run_id = ${sqlString(runId)} AND seq ${which === 'own' ? '<' : '>='} ${LATE_SEQ} ORDER BY work, seq`,
  );
  const byWork = new Map<string, JournalLine[]>();
  for (const [work, record] of reader.getRows() as [string, string][]) {
    const lines = byWork.get(work) ?? [];
    lines.push(JSON.parse(record) as JournalLine);
    byWork.set(work, lines);
  }
  return byWork;
}

/** What a journal of these records counts as spent (its `totals().credits`). */
async function totalCredits(records: JournalLine[]): Promise<number> {
  return (await CallJournal.replay(new ArchivedJournalLog('', records))).totals().credits;
}

/**
 * A journal the lake keeps: its records, read back as they were appended. Nothing is appended to
 * it: its run is over.
 */
class ArchivedJournalLog implements JournalLog {
  constructor(
    readonly work: string,
    private readonly lines: JournalLine[],
  ) {}

  async records(): Promise<JournalLine[]> {
    return this.lines;
  }

  async claim(): Promise<void> {
    throw new Error(`the journal of ${this.work} is archived in the lake: its run is over`);
  }

  async owner(): Promise<number | undefined> {
    return undefined;
  }

  async append(): Promise<void> {
    throw new Error(`the journal of ${this.work} is archived in the lake: its run is over`);
  }

  async sync(): Promise<void> {}

  async close(): Promise<void> {}
}

/** The journals the lake keeps, of one run or of every run, by run: for a post-mortem and the ledger's checks. */
export async function archivedJournalLogs(dataDir: string, runId?: string): Promise<Map<string, JournalLog[]>> {
  const where = runId === undefined ? '' : `WHERE run_id = ${sqlString(runId)}`;
  const { rows } = await queryWarehouse(dataDir, `SELECT run_id, work, record::VARCHAR AS record FROM call_journal ${where} ORDER BY run_id, work, seq`);
  const byWork = new Map<string, { runId: string; work: string; lines: JournalLine[] }>();
  for (const row of rows) {
    const key = `${String(row.run_id)}\n${String(row.work)}`;
    let journal = byWork.get(key);
    if (!journal) byWork.set(key, (journal = { runId: String(row.run_id), work: String(row.work), lines: [] }));
    journal.lines.push(JSON.parse(String(row.record)) as JournalLine);
  }
  const byRun = new Map<string, JournalLog[]>();
  for (const { runId: run, work, lines } of byWork.values()) byRun.set(run, [...(byRun.get(run) ?? []), new ArchivedJournalLog(work, lines)]);
  return byRun;
}
