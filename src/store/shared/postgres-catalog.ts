/**
 * What shared storage keeps in PostgreSQL (HARVESTER_CATALOG), because it must be transactional
 * and seen at once by every machine: the call journals (a row per record, committed before what
 * it records goes on), each journal's claim, the answers settled before their segment object was
 * uploaded (WaitingAnswer), and small documents (listing coverage, the job registry, the
 * credits-low alert). The warehouse's DuckLake catalog lives in the same database,
 * in tables of its own (ducklake_*).
 */
import pg from 'pg';
import { SupersededAttemptError, type JournalLine, type JournalLog, type JournalStore, type LateLogs } from '../call-journal.js';
import { newStoreId, type StoreIdentity } from '../store-identity.js';
import { redactedUrl } from './shared-settings.js';

/** A catalog failed: says what, where (without the password), and PostgreSQL's own words. */
export class CatalogError extends Error {
  override readonly name = 'CatalogError';
  constructor(action: string, where: string, cause: unknown) {
    super(`cannot ${action} in the catalog ${where}: ${(cause as Error).message}`, { cause });
  }
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS harvester_journal (
  seq bigserial PRIMARY KEY,
  run_id text NOT NULL,
  work_id text NOT NULL,
  record jsonb NOT NULL
);
CREATE INDEX IF NOT EXISTS harvester_journal_work ON harvester_journal (run_id, work_id, seq);
CREATE TABLE IF NOT EXISTS harvester_journal_claim (
  run_id text NOT NULL,
  work_id text NOT NULL,
  attempt integer NOT NULL,
  PRIMARY KEY (run_id, work_id)
);
CREATE TABLE IF NOT EXISTS harvester_run_ended (
  run_id text PRIMARY KEY,
  ended_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS harvester_late_record (
  seq bigserial PRIMARY KEY,
  run_id text NOT NULL,
  work_id text NOT NULL,
  record jsonb NOT NULL
);
CREATE TABLE IF NOT EXISTS harvester_waiting_answer (
  seq bigserial PRIMARY KEY,
  run_id text NOT NULL,
  run_folder text NOT NULL,
  key text NOT NULL,
  frame bytea NOT NULL
);
CREATE INDEX IF NOT EXISTS harvester_waiting_answer_run ON harvester_waiting_answer (run_folder, seq);
CREATE TABLE IF NOT EXISTS harvester_document (
  kind text NOT NULL,
  key text NOT NULL,
  value jsonb NOT NULL,
  PRIMARY KEY (kind, key)
);`;

/**
 * An answer whose call was settled before the segment object holding it was uploaded: kept in the
 * catalog with the settlement (one statement), so the settlement never outlives its answer, and
 * removed once the upload is done (or with its run). Its frame is the segment frame (segment.ts).
 */
export interface WaitingAnswer {
  seq: number;
  runId: string;
  runFolder: string;
  key: string;
  frame: Buffer;
}

/** The kinds of document the catalog keeps, each by its own key. */
export type DocumentKind = 'coverage' | 'job' | 'target-job' | 'alert' | 'mark' | 'store' | 'archiving';

export class PostgresCatalog implements JournalStore {
  private constructor(
    private readonly pool: pg.Pool,
    readonly where: string,
  ) {}

  /** Connects and makes the catalog's tables, unless they are there. */
  static async open(url: string): Promise<PostgresCatalog> {
    const where = redactedUrl(url);
    const pool = new pg.Pool({ connectionString: url, max: 8 });
    // An idle client's error (the server restarted) surfaces at the next query, not as a crash.
    pool.on('error', () => undefined);
    const catalog = new PostgresCatalog(pool, where);
    try {
      // One maker at a time: CREATE ... IF NOT EXISTS races with itself on a new database.
      await catalog.inTransaction(async (client) => {
        await client.query('SELECT pg_advisory_xact_lock(7350001)');
        await client.query(SCHEMA);
      });
    } catch (error) {
      await pool.end();
      throw new CatalogError('make the harvester tables', where, error);
    }
    return catalog;
  }

  /** The runs are marked ended first (a row each, kept): a stale attempt's claim or append after it finds the mark. */
  async removeRunJournals(runIds: readonly string[]): Promise<void> {
    if (runIds.length === 0) return;
    await this.query('mark runs ended', 'INSERT INTO harvester_run_ended (run_id) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING', [runIds]);
    await this.query('remove the journals of ended runs', 'DELETE FROM harvester_journal WHERE run_id = ANY($1)', [runIds]);
    await this.query('remove the journals\' claims of ended runs', 'DELETE FROM harvester_journal_claim WHERE run_id = ANY($1)', [runIds]);
    await this.query('remove the archiving marks of ended runs', "DELETE FROM harvester_document WHERE kind = 'archiving' AND key = ANY($1)", [runIds]);
  }

  async markArchiving(runIds: readonly string[]): Promise<void> {
    for (const runId of runIds) await this.putDocument('archiving', runId, { at: new Date().toISOString() });
  }

  async archivingMarked(runIds: readonly string[]): Promise<Set<string>> {
    const found = await this.query('read the archiving marks of runs', "SELECT key FROM harvester_document WHERE kind = 'archiving' AND key = ANY($1)", [runIds]);
    return new Set(found.rows.map((row: { key: string }) => row.key));
  }

  journalLog(runId: string, workId: string): PostgresJournalLog {
    return new PostgresJournalLog(this, runId, workId);
  }

  lateLog(runId: string, workId: string): PostgresJournalLog {
    return new PostgresJournalLog(this, runId, workId, 'late');
  }

  async lateLogs(): Promise<LateLogs[]> {
    const found = await this.query('list the late records of ended runs', 'SELECT DISTINCT run_id, work_id FROM harvester_late_record ORDER BY run_id, work_id', []);
    const byRun = new Map<string, PostgresJournalLog[]>();
    for (const row of found.rows as { run_id: string; work_id: string }[]) {
      const logs = byRun.get(row.run_id) ?? [];
      logs.push(this.lateLog(row.run_id, row.work_id));
      byRun.set(row.run_id, logs);
    }
    return [...byRun].map(([runId, logs]) => ({ runId, logs }));
  }

  async removeLateLogs(runIds: readonly string[]): Promise<void> {
    if (runIds.length === 0) return;
    await this.query('remove the late records a load archived', 'DELETE FROM harvester_late_record WHERE run_id = ANY($1)', [runIds]);
  }

  /** The answers waiting for their upload: a run's (by its folder), or every run's. */
  async waitingAnswers(runFolder?: string): Promise<WaitingAnswer[]> {
    const found =
      runFolder === undefined
        ? await this.query('read the answers waiting for their upload', 'SELECT seq, run_id, run_folder, key, frame FROM harvester_waiting_answer ORDER BY seq', [])
        : await this.query('read a run\'s answers waiting for their upload', 'SELECT seq, run_id, run_folder, key, frame FROM harvester_waiting_answer WHERE run_folder = $1 ORDER BY seq', [runFolder]);
    return found.rows.map((row: { seq: string; run_id: string; run_folder: string; key: string; frame: Buffer }) => ({
      seq: Number(row.seq),
      runId: row.run_id,
      runFolder: row.run_folder,
      key: row.key,
      frame: row.frame,
    }));
  }

  /** Keeps an answer no settlement carries (a media file) until its group is uploaded; resolves with its number among the waiting. */
  async keepWaitingAnswer(answer: Omit<WaitingAnswer, 'seq'>): Promise<number> {
    const inserted = await this.query(
      'keep an answer until its upload',
      'INSERT INTO harvester_waiting_answer (run_id, run_folder, key, frame) VALUES ($1, $2, $3, $4) RETURNING seq',
      [answer.runId, answer.runFolder, answer.key, answer.frame],
    );
    return Number((inserted.rows[0] as { seq: string }).seq);
  }

  /** Forgets waiting answers by their numbers: their segment object is uploaded. */
  async forgetWaitingAnswers(seqs: readonly number[]): Promise<void> {
    if (seqs.length === 0) return;
    await this.query('forget answers uploaded', 'DELETE FROM harvester_waiting_answer WHERE seq = ANY($1)', [seqs]);
  }

  /** Forgets a run's waiting answers: its answers are in the lake, and it is over. */
  async removeWaitingAnswers(runFolder: string): Promise<void> {
    await this.query('remove the waiting answers of an ended run', 'DELETE FROM harvester_waiting_answer WHERE run_folder = $1', [runFolder]);
  }

  async runJournalLogs(runId: string): Promise<JournalLog[]> {
    const works = await this.query('list the journals of a run', 'SELECT DISTINCT work_id FROM harvester_journal WHERE run_id = $1 ORDER BY work_id', [runId]);
    return works.rows.map((row: { work_id: string }) => this.journalLog(runId, row.work_id));
  }

  async getDocument<T>(kind: DocumentKind, key: string): Promise<T | undefined> {
    const found = await this.query(`read a ${kind} document`, 'SELECT value FROM harvester_document WHERE kind = $1 AND key = $2', [kind, key]);
    return found.rows[0]?.value as T | undefined;
  }

  async putDocument(kind: DocumentKind, key: string, value: unknown): Promise<void> {
    await this.query(
      `write a ${kind} document`,
      'INSERT INTO harvester_document (kind, key, value) VALUES ($1, $2, $3) ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value',
      [kind, key, JSON.stringify(value)],
    );
  }

  /**
   * The identity of the shared store whose objects are under `storageRoot` (`s3://bucket/prefix/`)
   * and whose catalog this is: a document made once, by whichever process asks first (the insert
   * of a second asker does nothing, and it reads the first's).
   */
  async storeIdentity(storageRoot: string): Promise<StoreIdentity> {
    await this.query('make the store id', 'INSERT INTO harvester_document (kind, key, value) VALUES ($1, $2, $3) ON CONFLICT (kind, key) DO NOTHING', [
      'store',
      storageRoot,
      JSON.stringify({ id: newStoreId(), created_at: new Date().toISOString() }),
    ]);
    const made = await this.getDocument<{ id: string }>('store', storageRoot);
    if (!made?.id) throw new CatalogError('read the store id', this.where, new Error(`no store document for ${storageRoot}`));
    return { id: made.id, location: `the shared store ${storageRoot} with the catalog ${this.where}` };
  }

  async deleteDocument(kind: DocumentKind, key: string): Promise<void> {
    await this.query(`delete a ${kind} document`, 'DELETE FROM harvester_document WHERE kind = $1 AND key = $2', [kind, key]);
  }

  /**
   * Runs `work` holding a lock that one process at a time, on any machine, can hold (a PostgreSQL
   * advisory lock, on a connection of its own: released when `work` ends, or when a killed holder's
   * connection drops).
   */
  async withLock<T>(name: string, work: () => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query('SELECT pg_advisory_lock(hashtext($1))', [name]);
      try {
        return await work();
      } finally {
        await client.query('SELECT pg_advisory_unlock(hashtext($1))', [name]);
      }
    } finally {
      client.release();
    }
  }

  async query(action: string, sql: string, values: unknown[]): Promise<pg.QueryResult> {
    try {
      return await this.pool.query(sql, values);
    } catch (error) {
      throw new CatalogError(action, this.where, error);
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }

  /** Runs `work` in one transaction on one connection: committed if it returns, rolled back if it throws. */
  async inTransaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }
}

/**
 * When a journal's record may be appended ($1 the run, $2 the work, $4 the attempt that claimed it
 * through this log, if any): its run is not over, and that attempt still holds the claim. Checked
 * inside the INSERT: no round trip of its own.
 */
const APPENDABLE = `NOT EXISTS (SELECT 1 FROM harvester_run_ended WHERE run_id = $1)
  AND ($4::integer IS NULL OR EXISTS (SELECT 1 FROM harvester_journal_claim WHERE run_id = $1 AND work_id = $2 AND attempt = $4::integer))`;

/**
 * A journal as rows: each record is committed by its INSERT before `append` returns, so a worker
 * killed at any moment leaves every record it appended, and none cut.
 */
export class PostgresJournalLog implements JournalLog {
  private readonly table: 'harvester_journal' | 'harvester_late_record';
  /** The attempt that claimed the journal through this log: only while it holds the claim are records appended. */
  private claimed: number | undefined;

  constructor(
    private readonly catalog: PostgresCatalog,
    private readonly runId: string,
    private readonly workId: string,
    /** `late`: the run's late records (harvester_late_record), appended after its journals were removed. */
    kind: 'journal' | 'late' = 'journal',
  ) {
    this.table = kind === 'late' ? 'harvester_late_record' : 'harvester_journal';
  }

  get work(): string {
    return this.workId;
  }

  async records(): Promise<JournalLine[]> {
    const rows = await this.catalog.query('read a call journal', `SELECT record FROM ${this.table} WHERE run_id = $1 AND work_id = $2 ORDER BY seq`, [this.runId, this.workId]);
    return rows.rows.map((row: { record: JournalLine }) => row.record);
  }

  /**
   * One statement: claimed unless a later attempt holds the claim or the run is marked ended (a
   * frozen worker's stale task, woken), in which case nothing changes and it throws.
   */
  async claim(attempt: number): Promise<void> {
    const claimed = await this.catalog.query(
      'claim a call journal',
      `INSERT INTO harvester_journal_claim (run_id, work_id, attempt)
       SELECT $1, $2, $3 WHERE NOT EXISTS (SELECT 1 FROM harvester_run_ended WHERE run_id = $1)
       ON CONFLICT (run_id, work_id) DO UPDATE SET attempt = excluded.attempt WHERE harvester_journal_claim.attempt <= excluded.attempt`,
      [this.runId, this.workId, attempt],
    );
    if (claimed.rowCount === 0) throw new SupersededAttemptError(`attempt ${attempt} of work ${this.workId} was superseded by a later attempt, or its run is over: it claims nothing`);
    this.claimed = attempt;
  }

  async owner(): Promise<number | undefined> {
    const rows = await this.catalog.query('read a call journal\'s claim', 'SELECT attempt FROM harvester_journal_claim WHERE run_id = $1 AND work_id = $2', [this.runId, this.workId]);
    return rows.rows[0]?.attempt as number | undefined;
  }

  /** Appended unless the run is marked ended (its journals removed), in one statement; then it throws RunJournalsEndedError. */
  async append(line: JournalLine): Promise<void> {
    if (this.table === 'harvester_late_record') {
      await this.catalog.query('append a late record', 'INSERT INTO harvester_late_record (run_id, work_id, record) VALUES ($1, $2, $3)', [this.runId, this.workId, JSON.stringify(line)]);
      return;
    }
    const appended = await this.catalog.query('append to a call journal', `INSERT INTO harvester_journal (run_id, work_id, record) SELECT $1, $2, $3 WHERE ${APPENDABLE}`, [
      this.runId,
      this.workId,
      JSON.stringify(line),
      this.claimed ?? null,
    ]);
    if (appended.rowCount === 0) throw this.refused();
  }

  private refused(): SupersededAttemptError {
    return new SupersededAttemptError(`attempt ${this.claimed} of work ${this.workId} lost its claim (to a later attempt, or its run's end): it appends nothing to the journal`);
  }

  /**
   * Appends a settlement and keeps its answer (not yet uploaded) in the catalog, in one statement:
   * both are committed, or neither. Resolves with the answer's number among the waiting.
   */
  async appendWithAnswer(line: JournalLine, answer: Omit<WaitingAnswer, 'seq'>): Promise<number> {
    const inserted = await this.catalog.query(
      'append to a call journal with its answer',
      `WITH open AS (SELECT 1 WHERE ${APPENDABLE.replaceAll('$4', '$8')}),
       answer AS (INSERT INTO harvester_waiting_answer (run_id, run_folder, key, frame) SELECT $4, $5, $6, $7 FROM open RETURNING seq),
       journal AS (INSERT INTO harvester_journal (run_id, work_id, record) SELECT $1, $2, $3 FROM open)
       SELECT seq FROM answer`,
      [this.runId, this.workId, JSON.stringify(line), answer.runId, answer.runFolder, answer.key, answer.frame, this.claimed ?? null],
    );
    if (inserted.rows.length === 0) throw this.refused();
    return Number((inserted.rows[0] as { seq: string }).seq);
  }

  async sync(): Promise<void> {
    // Each record was committed by its own INSERT.
  }

  async close(): Promise<void> {
    // The pool is the catalog's.
  }
}
