/**
 * The worker's handle on its load process (src/warehouse/load-process.ts), kept warm between loads.
 *
 * Why warm: starting Node and DuckDB's native library took about 0.2 s of every run's final load,
 * a run's last step, so it added to every run's duration; a short run ends before a process
 * started with it is ready. The process is started with the worker (`prewarm`), and it stays
 * ready for the runs that follow, however far apart (a schedule's next run may be a day away).
 * A process that has loaded keeps what DuckDB's allocations grew to (about 110 MB after 100,000
 * items, against 80 MB fresh), so after a minute without loads it is replaced by a fresh one:
 * the next run finds a process ready, and the memory of the last load goes back.
 *
 * Loads go one at a time: DuckDB lets one writer hold the work database, and two loads of one data
 * directory in one process would only wait on each other.
 */
import { fork, type ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import pLimit from 'p-limit';
import type { Logger } from '../logger.js';
import { PROJECT_ROOT } from '../project-paths.js';
import type { LoadRequest } from './load-process.js';
import type { LoadResult } from './loader.js';
import type { SchemaContracts } from '../harvest/schema-contract.js';

const LOAD_PROCESS = join(PROJECT_ROOT, 'dist', 'src', 'warehouse', 'load-process.js');

/**
 * The load process's environment: the worker's at the time, with glibc's malloc held to one arena (unless the
 * user chose otherwise), so the threads that allocate beside its one DuckDB thread (lake.ts) do not each
 * keep an arena of their own. Measured small: the load process's peak on a 12,800-item final load was
 * 231–250 MB with it against 248–260 MB without (bench/RESULTS.md, 2026-11-28 20:10–20:20Z), and the
 * standing worker's tree on the peer benchmark's 32 channels 406–429 MB (median 416) against 411–441
 * (median 432), three rounds interleaved (2026-11-29 00:36Z); the final load no slower. musl ignores it.
 */
const loadProcessEnv = (): NodeJS.ProcessEnv => ({ ...process.env, MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? '1' });

/**
 * The load process's Node flags: not the worker's (its old-space cap, src/cli/stack.ts, is not meant for
 * DuckDB's process), and V8's young generation held to 2 MB a semi-space (16 MB by default), as the worker's
 * is to 4: a load's allocations (the answers read and parsed, the rows staged) grow it to its cap, and its
 * pages stay in the process's memory. On the peer benchmark's 32 channels (bench/RESULTS.md, 2026-11-29
 * 04:33–04:48Z), the standing worker's tree peaked at 404–414 MB with it and at 416–442 MB without.
 */
const LOAD_PROCESS_FLAGS = ['--max-semi-space-size=2'];

/** How long a load process that has loaded stays idle before a fresh one replaces it. */
export const LOAD_PROCESS_RENEW_MS = 60_000;

/** The end of the load process's stderr kept for error messages (a crash's last words). */
const STDERR_TAIL_CHARS = 2_000;

type LoadReply = { result: LoadResult } | { error: string };
/**
 * Said by the load process around the maintenance it runs after a run's final load (load-process.ts);
 * `error` when the maintenance failed (it is due again, and done at the next run's final load).
 */
type MaintenanceNotice = { maintaining: boolean; error?: string };

/**
 * A load process that ended without being asked to (by `close`, a renewal or an abort): what it was
 * doing, how it ended, and its last words (the end of its stderr) and last error it reported.
 */
export interface LoadProcessEnd {
  pid: number | undefined;
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** It was running the daily maintenance (after a run's final load had its answer). */
  maintaining: boolean;
  /** A load was waiting on it (that load fails, saying the same). */
  loading: boolean;
  lastWords: string | undefined;
  lastError: string | undefined;
}

/** Told when a load process ends unasked, or its maintenance fails: the worker logs both. */
export interface LoadProcessReporter {
  ended(end: LoadProcessEnd): void;
  maintenanceFailed(error: string): void;
}

/** Without a worker's logger (tests, tools): one line to this process's stderr each, never silence. */
const STDERR_REPORTER: LoadProcessReporter = {
  ended: (end) => process.stderr.write(`the load process ended unasked: ${describeLoadProcessEnd(end)}\n`),
  maintenanceFailed: (error) => process.stderr.write(`the daily maintenance failed in the load process: ${error}\n`),
};

/** The worker's reporter: both as errors in its log (without a logger, this process's stderr). */
export function loggingReporter(logger: Logger | undefined): LoadProcessReporter {
  if (!logger) return STDERR_REPORTER;
  return {
    ended: (end) => logger.error({ loadProcess: end }, `the load process ended unasked: ${describeLoadProcessEnd(end)}`),
    maintenanceFailed: (error) => logger.error({ err: error }, 'the daily maintenance failed in the load process; it is due again after the next run'),
  };
}

/** How a load process ended, in one line: exit code or signal, what it was doing, its last words. */
export function describeLoadProcessEnd(end: LoadProcessEnd): string {
  const how = end.signal ? `killed by ${end.signal}` : `exit code ${end.exitCode}`;
  const doing = end.maintaining ? ' during the daily maintenance' : end.loading ? ' during a load' : ' while idle';
  const said = [end.lastError && `last error: ${end.lastError}`, end.lastWords && `last words: ${end.lastWords}`].filter(Boolean).join('; ');
  return `pid ${end.pid ?? '?'} ${how}${doing}${said ? ` (${said})` : ''}`;
}

function isMaintenanceNotice(message: unknown): message is MaintenanceNotice {
  return typeof message === 'object' && message !== null && 'maintaining' in message;
}

export class WarmLoader {
  #child: ChildProcess | undefined;
  /** Whether the running process has loaded (and so holds what its loads grew). */
  #childLoaded = false;
  #stderrTail = '';
  #renewTimer: NodeJS.Timeout | undefined;
  /** The process runs the daily maintenance: it is not replaced until that ends (nor cut short by a renewal). */
  #maintaining = false;
  /** The last error the running process reported (a failed maintenance), for the report of its end. */
  #lastError: string | undefined;
  /** Processes this loader stopped itself (close): their end is expected, and not reported. */
  readonly #stopped = new WeakSet<ChildProcess>();
  readonly #oneAtATime = pLimit(1);

  constructor(
    private readonly renewAfterMs = LOAD_PROCESS_RENEW_MS,
    private readonly reporter: LoadProcessReporter = STDERR_REPORTER,
  ) {}

  /** Starts the load process now, if it is not running, so a later `load` does not wait for it. */
  prewarm(): void {
    this.#running();
    if (this.#oneAtATime.activeCount === 0 && this.#oneAtATime.pendingCount === 0) this.#idle();
  }

  /**
   * Loads every pending landing of `dataDir`, under the harvests' `schemaContracts`; an abort kills
   * the load (batches commit one by one, so nothing is lost). With `countRun`, the result counts
   * that run's landings in the lake.
   */
  load(dataDir: string, signal?: AbortSignal, countRun?: string, schemaContracts?: SchemaContracts): Promise<LoadResult> {
    return this.#oneAtATime(() => this.#load({ dataDir, ...(countRun === undefined ? {} : { countRun }), ...(schemaContracts === undefined ? {} : { schemaContracts }) }, signal));
  }

  /**
   * Makes the data directory's lake, if it is not made, loading nothing (a run's start on a new data
   * directory); a lake whose files are not whole is repaired (lake-repair.ts: the result's `repair`).
   */
  makeLake(dataDir: string): Promise<LoadResult> {
    return this.#oneAtATime(() => this.#load({ dataDir, makeLakeOnly: true }, undefined));
  }

  /**
   * Loads what is pending now, without waiting for it: the loads during a run, so what it buys
   * appears in the warehouse as it goes and its final load has only the rest. Skipped while a load
   * waits its turn (it will take these landings too). A failure is only reported to `onError`: the
   * run's final load loads what this one did not, or fails the run saying why. Settles once the
   * load and its callback are done (at once when skipped).
   */
  loadInBackground(dataDir: string, onLoaded: (result: LoadResult) => void, onError: (error: Error) => void, schemaContracts?: SchemaContracts): Promise<void> {
    if (this.#oneAtATime.pendingCount > 0) return Promise.resolve();
    return this.load(dataDir, undefined, undefined, schemaContracts).then(onLoaded, onError);
  }

  /** Stops the load process, if one runs. */
  close(): void {
    clearTimeout(this.#renewTimer);
    if (this.#child) this.#stopped.add(this.#child);
    this.#child?.kill();
    this.#child = undefined;
  }

  #running(): ChildProcess {
    if (this.#child?.connected) return this.#child;
    this.#childLoaded = false;
    this.#stderrTail = '';
    this.#lastError = undefined;
    const child = fork(LOAD_PROCESS, [], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'], execArgv: LOAD_PROCESS_FLAGS, env: loadProcessEnv() });
    let tail = '';
    const stderrTail = () => tail;
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      tail = (tail + chunk).slice(-STDERR_TAIL_CHARS);
      if (this.#child === child) this.#stderrTail = tail;
    });
    child.on('error', () => undefined); // a failed start shows as 'exit' to the load waiting on it
    this.#maintaining = false;
    child.on('message', (message: unknown) => {
      if (!isMaintenanceNotice(message) || this.#child !== child) return;
      this.#maintaining = message.maintaining;
      if (message.error !== undefined) {
        this.#lastError = message.error;
        this.reporter.maintenanceFailed(message.error);
      }
      // Ended while idle: the renewal that waited for it is scheduled afresh.
      if (!message.maintaining && this.#oneAtATime.activeCount === 0 && this.#oneAtATime.pendingCount === 0) this.#idle();
    });
    let endedAs: Omit<LoadProcessEnd, 'exitCode' | 'signal' | 'lastWords'> | undefined;
    child.on('exit', () => {
      // Every end this loader did not ask for is reported, whatever the process was doing: one
      // during the maintenance that follows a run's answer had nobody waiting on it, and was silent.
      if (!this.#stopped.has(child) && this.#child === child) {
        endedAs = { pid: child.pid, maintaining: this.#maintaining, loading: this.#oneAtATime.activeCount > 0, lastError: this.#lastError };
      }
      if (this.#child === child) {
        this.#child = undefined;
        this.#maintaining = false;
      }
    });
    // Reported once its stderr is closed (after 'exit'): a crash's last words are read by then.
    child.on('close', (exitCode: number | null, signal: NodeJS.Signals | null) => {
      if (endedAs) this.reporter.ended({ ...endedAs, exitCode, signal, lastWords: this.#lastWords(stderrTail()) });
    });
    this.#child = child;
    return child;
  }

  /** Lets the idle process not hold this process open, and has one that has loaded replaced after a while. */
  #idle(): void {
    const child = this.#child;
    if (!child) return;
    setHeld(child, false);
    clearTimeout(this.#renewTimer);
    if (this.#childLoaded) this.#renewTimer = setTimeout(() => this.#renew(), this.renewAfterMs).unref();
  }

  /**
   * The last lines a process wrote to its stderr (up to 3), without the Node.js version line a
   * crash ends with, or undefined if it wrote none.
   */
  #lastWords(tail = this.#stderrTail): string | undefined {
    const lines = tail.split('\n').map((line) => line.trim()).filter((line) => line && !/^Node\.js v\d/.test(line));
    return lines.slice(-3).join(' | ') || undefined;
  }

  #renew(): void {
    // A maintenance under way is let finish: the notice that it ended schedules the renewal again.
    if (this.#maintaining) return;
    this.close();
    setHeld(this.#running(), false);
  }

  async #load(request: LoadRequest, signal: AbortSignal | undefined): Promise<LoadResult> {
    const { dataDir } = request;
    signal?.throwIfAborted();
    clearTimeout(this.#renewTimer);
    const child = this.#running();
    this.#childLoaded = true;
    setHeld(child, true);
    try {
      return await new Promise<LoadResult>((resolve, reject) => {
        const settle = () => {
          child.off('message', onMessage);
          child.off('exit', onExit);
          signal?.removeEventListener('abort', onAbort);
        };
        const onMessage = (reply: LoadReply | MaintenanceNotice) => {
          if (isMaintenanceNotice(reply)) return;
          settle();
          if ('error' in reply) reject(new Error(`the load of ${dataDir} failed: ${reply.error}`));
          else {
            // A run's final load (countRun) is followed by the daily maintenance in that process,
            // which says `{ maintaining: true }` just after this answer: marked now, so that what
            // happens between the two (a renewal, the process's death) is seen as during it.
            if (request.countRun !== undefined) this.#maintaining = true;
            resolve(reply.result);
          }
        };
        const onExit = (code: number | null, killedBy: NodeJS.Signals | null) => {
          settle();
          const lastWords = this.#lastWords();
          reject(new Error(`the load of ${dataDir} failed: its process ended (${killedBy ?? `exit code ${code}`})${lastWords ? `: ${lastWords}` : ''}`));
        };
        const onAbort = () => {
          settle();
          this.close();
          reject(signal?.reason instanceof Error ? signal.reason : new Error(`the load of ${dataDir} was cancelled`));
        };
        child.on('message', onMessage);
        child.on('exit', onExit);
        signal?.addEventListener('abort', onAbort, { once: true });
        child.send(request);
      });
    } finally {
      this.#idle();
    }
  }
}

/** Whether the child (its handle, IPC channel and stderr pipe) keeps this process's event loop alive. */
function setHeld(child: ChildProcess, held: boolean): void {
  const handles = [child, child.channel, child.stderr as Socket | null];
  for (const handle of handles) {
    if (held) handle?.ref();
    else handle?.unref();
  }
}
