/**
 * Test support for crash consistency: what a disk keeps of a data directory after a power loss,
 * reconstructed from an `strace` record of every write and sync the processes made there.
 *
 * Why strace: it needs no root here (a tracer may ptrace its own children) and no build step,
 * it sees every thread of the worker and of the load process it forks (DuckDB's writes included),
 * and its `-y` names each file descriptor's path, so the record says which file each write and
 * each fsync was for. The process tree is SIGKILLed at the crash point; the record then ends
 * exactly where the processes stopped, and the files are as the page cache held them.
 *
 * The model, applied to those files (`reconstructDisk`):
 * - A file's contents are on the disk up to its size at its last completed fsync/fdatasync. A file
 *   written (or truncated) after that loses everything written after it: it is cut back to that
 *   size, or to 0 bytes when it was never synced (the worst case of delayed allocation, as the
 *   measurement of issue 38 did). A sync covers what was written before it started, and counts
 *   only once it returned.
 * - A name made after the last completed fsync of its folder (a created file, a folder, a link, a
 *   rename's new name) is not on the disk: the file or folder is removed, and a renamed file goes
 *   back to its old name (a rename within one folder is one journalled change, so it is kept or
 *   lost whole). A rename over a file that existed keeps the new contents under the name, since the
 *   old contents are gone by the time the record is read (reported as such; the harvester's
 *   renames over a name are each followed by a folder fsync, so it does not arise for it).
 * - Overwrites in place cannot be undone without their old contents, so SQLite's and DuckDB's own
 *   database files (`*.sqlite`, `*-journal`, `*-wal`, `*.duckdb`, `*.wal`) are kept exactly as
 *   written. That is sound for them because each orders its own writes: SQLite (the DuckLake
 *   catalog, rollback journal, synchronous=FULL) fsyncs the journal of old pages before it overwrites
 *   a page and fsyncs the database before it deletes the journal, so whatever the disk kept of an
 *   unfinished transaction, the next open rolls it back to the last commit, which is what keeping the
 *   files as written gives too; DuckDB syncs its WAL at each commit and its checkpoints before the
 *   header that names them. The record still lists their writes after the last sync, so a reader
 *   sees when they happen.
 * - An unlink stays done (a file removed may in truth come back when its folder was not synced;
 *   the harvester only ever gains by that: a segment or journal back is loaded again, once).
 */
import { cpSync, existsSync, lstatSync, readdirSync, renameSync, rmSync, truncateSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

/** The system calls the record needs (the trace's `-e trace=`). */
export const TRACED_CALLS = [
  'openat', 'open', 'creat', 'write', 'pwrite64', 'writev', 'pwritev', 'pwritev2', 'lseek', 'ftruncate', 'truncate',
  'fsync', 'fdatasync', 'sync_file_range', 'sync', 'syncfs', 'rename', 'renameat', 'renameat2', 'link', 'linkat',
  'unlink', 'unlinkat', 'mkdir', 'mkdirat', 'rmdir', 'close',
];

/** The strace command line that records `command` into `log` (the command's children too). */
export function straceArgs(log: string, command: string[]): string[] {
  // -s 160: enough of each written buffer to see a segment frame's landing key (crash triggers).
  return ['-f', '-y', '-s', '160', '-o', log, '-e', `trace=${TRACED_CALLS.join(',')}`, ...command];
}

/** One completed system call of the record, on a path under the data directory. */
export interface TraceCall {
  /** Its place in the record: the line where it completed. */
  line: number;
  /** The line where it started (its `<unfinished ...>` line, or `line`). */
  startLine: number;
  name: string;
  /** The file (by its descriptor's path) or the path it names; a rename's/link's source. */
  path: string;
  /** A rename's or link's new name. */
  target?: string;
  fd?: number;
  /** Its return value (bytes written, the new offset, 0, or -1). */
  result: number;
  /** pwrite's offset, lseek's or ftruncate's argument. */
  offset?: number;
  flags?: string;
  /** The first bytes written, as strace shows them (for triggers). */
  text: string;
}

const HEAD = /^(\d+) +(?:(\w+)\((.*?) <unfinished \.\.\.>|<\.\.\. (\w+) resumed>(.*)|(\w+)\((.*))$/;
const RESULT = /\)\s+=\s+(-?\d+)(?:<[^>]*>)?(?:\s+\S+\s+\(.*\))?$/;

/**
 * Reads an strace record as it grows: `feed` takes the text appended since, gives the calls on
 * paths under `root` that completed in it, in the order they completed. A call split across
 * threads (`<unfinished ...>`, then `<... resumed>`) counts where it completed, and remembers where
 * it started (a sync covers only what was written before it started).
 */
export class TraceReader {
  private readonly pending = new Map<string, { args: string; line: number }>();
  private partial = '';
  private lineNumber = 0;
  readonly calls: TraceCall[] = [];

  constructor(private readonly root: string) {}

  feed(text: string): TraceCall[] {
    const lines = (this.partial + text).split('\n');
    this.partial = lines.pop()!;
    const found: TraceCall[] = [];
    for (const line of lines) {
      const call = this.read(line, this.lineNumber++);
      if (call) found.push(call);
    }
    this.calls.push(...found);
    return found;
  }

  private read(text: string, line: number): TraceCall | undefined {
    const match = HEAD.exec(text);
    if (!match) return undefined;
    const [, pid, unfinishedName, unfinishedArgs, resumedName, resumedRest, name, args] = match;
    if (unfinishedName !== undefined) {
      this.pending.set(`${pid}:${unfinishedName}`, { args: unfinishedArgs!, line });
      return undefined;
    }
    let call = { name: name!, body: args!, start: line };
    if (resumedName !== undefined) {
      const head = this.pending.get(`${pid}:${resumedName}`);
      if (!head) return undefined;
      this.pending.delete(`${pid}:${resumedName}`);
      call = { name: resumedName, body: `${head.args}${resumedRest}`, start: head.line };
    }
    const parsed = parseCall(call.name, call.body, this.root);
    return parsed ? { ...parsed, line, startLine: call.start } : undefined;
  }
}

/** Parses a whole strace record (see TraceReader). */
export function parseTrace(text: string, root: string): TraceCall[] {
  const reader = new TraceReader(root);
  reader.feed(`${text}\n`);
  return reader.calls;
}

/** The quoted strings of a call's arguments, unescaped enough for paths. */
function quoted(body: string): string[] {
  return [...body.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!.replace(/(.)\/+$/, '$1'));
}

function parseCall(name: string, body: string, root: string): Omit<TraceCall, 'line' | 'startLine'> | undefined {
  const result = RESULT.exec(body);
  if (!result) return undefined;
  const value = Number(result[1]);
  const under = (path: string | undefined) => path !== undefined && (path === root || path.startsWith(`${root}/`));
  const fdArg = /^(\d+)<([^>]*)>/.exec(body);
  if (/^(open|openat|creat)$/.test(name)) {
    const path = /= \d+<([^>]*)>/.exec(body)?.[1];
    if (!under(path) || value < 0) return undefined;
    return { name: 'open', path: path!, fd: value, result: value, flags: /, (O_[A-Z_|]+)/.exec(body)?.[1] ?? '', text: '' };
  }
  if (/^(rename|renameat|renameat2|link|linkat)$/.test(name)) {
    const [from, to] = quoted(body);
    if (value < 0 || !(under(from) || under(to))) return undefined;
    return { name: name.startsWith('link') ? 'link' : 'rename', path: from!, target: to!, result: value, text: '' };
  }
  if (/^(unlink|unlinkat|mkdir|mkdirat|rmdir|truncate)$/.test(name)) {
    const path = quoted(body)[0];
    if (value < 0 || !under(path)) return undefined;
    const kind = name === 'unlinkat' && /AT_REMOVEDIR/.test(body) ? 'rmdir' : name.replace(/at$/, '');
    return { name: kind, path: path!, result: value, ...(kind === 'truncate' ? { offset: Number(/, (\d+)\)/.exec(body)?.[1] ?? 0) } : {}), text: '' };
  }
  if (!fdArg || !under(fdArg[2])) return undefined;
  const base = { path: fdArg[2]!, fd: Number(fdArg[1]), result: value, text: quoted(body)[0] ?? '' };
  if (name === 'pwrite64' || name === 'pwritev' || name === 'pwritev2') {
    const offset = /, (\d+)(?:, \w+)?\)\s+=/.exec(body)?.[1];
    return { ...base, name: 'pwrite', offset: Number(offset) };
  }
  if (name === 'write' || name === 'writev') return { ...base, name: 'write' };
  if (name === 'lseek' || name === 'ftruncate') return { ...base, name, offset: Number(/^\d+<[^>]*>, (\d+)/.exec(body)?.[1] ?? 0) };
  if (name === 'fsync' || name === 'fdatasync' || name === 'close') return { ...base, name: name === 'close' ? 'close' : 'sync' };
  return undefined;
}

/** What happened to one file or name of the data directory at the crash. */
export interface Dropped {
  /** Relative to the data directory. */
  path: string;
  what: 'cut' | 'emptied' | 'name lost' | 'renamed back' | 'kept (old contents unknown)';
  /** Bytes in the page cache at the kill, and bytes the disk kept. */
  sizeAtKill?: number;
  sizeKept?: number;
}

interface FileState {
  /** Bytes written so far (the furthest end of any write, or the size a truncate left). */
  size: number;
  /** Its size when its last completed sync started, or undefined if never synced in the record. */
  synced: number | undefined;
  /** Written or truncated after that sync. */
  dirty: boolean;
  /** Size snapshots of syncs in flight, by the line where each started. */
  syncing: Map<number, number>;
}

/** Keeps SQLite's and DuckDB's database files as written (see the module's comment). */
export function ordersItsOwnWrites(path: string): boolean {
  return /(\.sqlite|\.sqlite-journal|\.sqlite-wal|\.duckdb|\.duckdb\.wal|\.wal)$/.test(path);
}

/** The state of the names and files the record touched, folded over its calls. */
class DiskModel {
  readonly files = new Map<string, FileState>();
  /** Names not yet made durable by a folder fsync, in the order made: path → how it was made. */
  readonly newNames = new Map<string, { how: 'created' | 'mkdir' | 'link' | 'rename'; from?: string; over: boolean; line: number }>();
  /** Folders made whose parent folder no fsync covered afterwards (strict POSIX: their names may be lost). */
  readonly foldersNeverSynced = new Set<string>();
  private line = 0;
  private readonly positions = new Map<string, { pos: number; append: boolean }>();
  private readonly dirSyncs = new Map<number, Set<string>>();

  constructor(private readonly existing: Set<string>) {}

  private file(path: string): FileState {
    let state = this.files.get(path);
    if (!state) {
      state = { size: 0, synced: undefined, dirty: false, syncing: new Map() };
      this.files.set(path, state);
    }
    return state;
  }

  private newName(path: string, how: 'created' | 'mkdir' | 'link' | 'rename', from?: string) {
    this.newNames.set(path, { how, ...(from ? { from } : {}), over: this.existing.has(path), line: this.line });
    if (how === 'mkdir') this.foldersNeverSynced.add(path);
    this.existing.add(path);
  }

  private wrote(path: string, end: number) {
    const state = this.file(path);
    state.size = Math.max(state.size, end);
    state.dirty = true;
  }

  /** A sync's start: what it will cover. */
  startSync(call: TraceCall) {
    if (this.isFolder(call.path)) {
      for (const folder of this.foldersNeverSynced) if (dirname(folder) === call.path) this.foldersNeverSynced.delete(folder);
      this.dirSyncs.set(call.startLine, new Set([...this.newNames.keys()].filter((name) => dirname(name) === call.path)));
    } else {
      this.file(call.path).syncing.set(call.startLine, this.file(call.path).size);
    }
  }

  private isFolder(path: string): boolean {
    return [...this.newNames.keys()].some((name) => dirname(name) === path) || (existsSync(path) && lstatSync(path).isDirectory()) || this.newNames.get(path)?.how === 'mkdir';
  }

  apply(call: TraceCall) {
    this.line = call.line;
    const key = `${call.fd}:${call.path}`;
    switch (call.name) {
      case 'open': {
        if (/O_CREAT/.test(call.flags ?? '') && !this.existing.has(call.path)) this.newName(call.path, 'created');
        this.existing.add(call.path);
        if (/O_TRUNC/.test(call.flags ?? '')) {
          this.file(call.path).size = 0;
          this.file(call.path).dirty = true;
        }
        this.positions.set(key, { pos: 0, append: /O_APPEND/.test(call.flags ?? '') });
        break;
      }
      case 'write': {
        if (call.result <= 0) break;
        const position = this.positions.get(key) ?? { pos: this.file(call.path).size, append: true };
        const start = position.append ? this.file(call.path).size : position.pos;
        this.wrote(call.path, start + call.result);
        position.pos = start + call.result;
        this.positions.set(key, position);
        break;
      }
      case 'pwrite':
        if (call.result > 0) this.wrote(call.path, call.offset! + call.result);
        break;
      case 'lseek':
        if (call.result >= 0) this.positions.set(key, { pos: call.result, append: this.positions.get(key)?.append ?? false });
        break;
      case 'ftruncate':
      case 'truncate':
        if (call.result === 0) {
          this.file(call.path).size = call.offset!;
          this.file(call.path).dirty = true;
        }
        break;
      case 'sync':
        this.finishSync(call);
        break;
      case 'close':
        this.positions.delete(key);
        break;
      case 'rename':
        this.renamed(call);
        break;
      case 'link':
        this.newName(call.target!, 'link');
        break;
      case 'mkdir':
        this.newName(call.path, 'mkdir');
        break;
      case 'unlink':
      case 'rmdir':
        this.existing.delete(call.path);
        this.newNames.delete(call.path);
        this.files.delete(call.path);
        break;
    }
  }

  private finishSync(call: TraceCall) {
    // A folder made before a sync completed is on the disk once it has (see foldersNeverSynced).
    if (call.result === 0) for (const [name, made] of this.newNames) if (made.how === 'mkdir' && made.line < call.startLine) this.newNames.delete(name);
    const covered = this.dirSyncs.get(call.startLine);
    if (covered) {
      this.dirSyncs.delete(call.startLine);
      if (call.result === 0) for (const name of covered) this.newNames.delete(name);
      return;
    }
    const state = this.file(call.path);
    const size = state.syncing.get(call.startLine);
    state.syncing.delete(call.startLine);
    if (call.result !== 0 || size === undefined) return;
    state.synced = size;
    // Written after the sync started: still dirty.
    state.dirty = state.size !== size;
  }

  private renamed(call: TraceCall) {
    const from = call.path;
    const to = call.target!;
    const moved = this.files.get(from);
    this.files.delete(from);
    if (moved) this.files.set(to, moved);
    const earlier = this.newNames.get(from);
    this.newNames.delete(from);
    this.existing.delete(from);
    // A name never made durable renamed again: the disk has neither; undo goes to removal.
    this.newName(to, earlier ? 'created' : 'rename', earlier ? undefined : from);
  }
}

/**
 * Applies the model (the module's comment) to `dataDir` in place, as the disk would have kept it
 * after a power loss at the record's end; `existing` are the paths that were there before the
 * record began. Returns every file cut, emptied or whose name was lost.
 */
export interface Reconstruction {
  /** Every file cut, emptied, or whose name was lost or went back. */
  dropped: Dropped[];
  /** Database files written after their last sync, kept as written (SQLite and DuckDB order their own writes). */
  keptAsWritten: string[];
  /** Folders made whose parent no fsync covered after (kept: see the module's comment), relative. */
  foldersNeverSynced: string[];
}

export function reconstructDisk(dataDir: string, calls: TraceCall[], existing: Set<string>): Reconstruction {
  const model = new DiskModel(new Set(existing));
  // Events in record order: a sync's start (its coverage) at its start line, every call at its end.
  const events: Array<{ at: number; start: boolean; call: TraceCall }> = calls.map((call) => ({ at: call.line, start: false, call }));
  for (const call of calls) if (call.name === 'sync') events.push({ at: call.startLine, start: true, call });
  events.sort((a, b) => a.at - b.at || (a.start ? -1 : 1));
  for (const event of events) {
    if (event.start) model.startSync(event.call);
    else model.apply(event.call);
  }
  const dropped: Dropped[] = [];
  const rel = (path: string) => relative(dataDir, path);
  // Names first, newest first, so a folder's contents go before (or with) the folder.
  for (const [path, made] of [...model.newNames].reverse()) {
    if (!existsSync(path)) continue;
    if (made.how === 'rename' && made.over) {
      dropped.push({ path: rel(path), what: 'kept (old contents unknown)' });
    } else if (made.how === 'rename' && made.from && !existsSync(made.from)) {
      renameSync(path, made.from);
      dropped.push({ path: rel(path), what: 'renamed back' });
      const state = model.files.get(path);
      if (state) {
        model.files.delete(path);
        model.files.set(made.from, state);
      }
    } else {
      const sizeAtKill = lstatSync(path).isFile() ? lstatSync(path).size : undefined;
      rmSync(path, { recursive: true, force: true });
      dropped.push({ path: rel(path), what: 'name lost', ...(sizeAtKill === undefined ? {} : { sizeAtKill, sizeKept: 0 }) });
    }
  }
  const keptAsWritten: string[] = [];
  for (const [path, state] of model.files) {
    if (!state.dirty || !existsSync(path) || !lstatSync(path).isFile()) continue;
    if (ordersItsOwnWrites(path)) {
      keptAsWritten.push(rel(path));
      continue;
    }
    const sizeAtKill = lstatSync(path).size;
    const sizeKept = Math.min(state.synced ?? 0, sizeAtKill);
    if (sizeKept === sizeAtKill) continue;
    truncateSync(path, sizeKept);
    dropped.push({ path: rel(path), what: sizeKept === 0 ? 'emptied' : 'cut', sizeAtKill, sizeKept });
  }
  return { dropped, keptAsWritten, foldersNeverSynced: [...model.foldersNeverSynced].map(rel) };
}

/** Every path under `dir` (files and folders), absolute. */
export function pathsUnder(dir: string): Set<string> {
  const paths = new Set<string>([dir]);
  const walk = (folder: string) => {
    for (const entry of readdirSync(folder, { withFileTypes: true })) {
      const path = join(folder, entry.name);
      paths.add(path);
      if (entry.isDirectory()) walk(path);
    }
  };
  if (existsSync(dir)) walk(dir);
  return paths;
}

/** A copy of the data directory as the page cache held it at the kill (what the processes had said). */
export function copyAtKill(dataDir: string, to: string): void {
  cpSync(dataDir, to, { recursive: true });
}
