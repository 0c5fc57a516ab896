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
import { join } from 'node:path';
import type { DuckDBConnection } from '@duckdb/node-api';
import { journalArchiveFolder } from '../store/layout.js';
import type { Store } from '../store/store.js';
import type { JournalLine, JournalLog } from '../store/call-journal.js';
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
  const file = join(folder, 'records.jsonl');
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
