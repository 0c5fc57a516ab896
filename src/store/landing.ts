/**
 * Landings: what a page is (its key, fixed by run, target and page, so a retry lands on the same key,
 * and its text), and the layout of earlier versions, one immutable JSON file per page under
 * `landing/`, which loads still read (and clear) after an upgrade and tests write to stand for it.
 * A page landed now goes into its run's segment (answer-segments.ts, segment.ts). Such a file is
 * written durably: every byte to a temporary (short writes continued), an fsync, an atomic rename,
 * then the directory's fsync (writeDurableFile); a write that fails leaves nothing under the key.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, existsSync } from 'node:fs';
import { basename, dirname, join, relative, sep } from 'node:path';
import type { EndpointKey } from '../api-catalog/endpoints.js';
import type { CallFailure } from '../harvest/progress.js';
import { writeDurableFile } from './durable-file.js';
import { landingFile, landingRoot, pageLandingKey, pathSegment, quarantineFile, quarantineRoot, runStatusKey } from './layout.js';

/** The billed call behind a page. Free pages (a job's results) have none; the job is billed once. */
export interface LandedCall {
  request_id: string;
  units: number;
  credits: number;
  cache?: 'HIT' | 'MISS';
  job_id?: string;
}

export interface PageLanding {
  format: 1;
  kind: 'page';
  run_id: string;
  harvest: string;
  /** The target's key, e.g. `channel:tiktok:some_handle:videos`. */
  target: string;
  /** 1-based page number within the target in this run. */
  page: number;
  endpoint: EndpointKey;
  params: Record<string, string>;
  /** Request id of the answer this page came in (billed or not). */
  request_id: string;
  observed_at: string;
  call?: LandedCall;
  /** Items before this page in its listing, for search ranks. */
  rank_offset?: number;
  /** The list's next cursor and has_more, so a retried activity can resume from the landing alone. */
  next_cursor?: string;
  has_more?: boolean;
  data: unknown;
}

/** A run's status, landed like a page so one loader writes every table. */
export interface RunLanding {
  format: 1;
  kind: 'run';
  run_id: string;
  harvest: string;
  /** Increases with each status landed for the run; the highest wins. */
  seq: number;
  status: string;
  started_at: string;
  finished_at?: string;
  budget_credits?: number;
  credits_spent?: number;
  items_landed?: number;
  error?: string;
  /** The enrichments the run's harvest asked for each listed item (`stats`, `comments`, …); on its final status. */
  enrichments?: string[];
  /** The run's enrichment calls that failed for good, on its final status: all of them, the latest say. */
  failed_calls?: Omit<CallFailure, 'target'>[];
}

export type Landing = PageLanding | RunLanding;

/** The landing's key (layout.ts's grammar): its identity in `loaded_landings`, and its path relative to the landing root. */
export function landingKey(landing: Landing): string {
  return landing.kind === 'run' ? runStatusKey(landing.run_id, landing.seq) : pageLandingKey(landing.run_id, landing.target, landing.page);
}

/**
 * A landing's text. A page's `data` is always its last member: the loader tells list pages from
 * resource pages by the bytes that end the file, without parsing it.
 */
export function landingText(landing: Landing): string {
  if (landing.kind === 'run') return JSON.stringify(landing);
  const { data, ...rest } = landing;
  return JSON.stringify({ ...rest, data });
}

/**
 * Writes a landing durably and returns its key; throws a FileWriteError (`cannot write landing
 * <path>: <cause>`, the cause's `code` kept) when it cannot, leaving nothing new under the key.
 */
export function writeLanding(dataDir: string, landing: Landing): string {
  const key = landingKey(landing);
  writeDurableFile(landingFile(dataDir, key), landingText(landing), { what: 'landing' });
  return key;
}

export function readLanding(dataDir: string, key: string): Landing {
  const file = landingFile(dataDir, key);
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Landing;
  } catch (error) {
    throw new Error(`landing ${file} cannot be read: ${(error as Error).message}`);
  }
}

/** Every landing key under the root, in run, target and page order. Temporary files are skipped. */
export function listLandings(dataDir: string): string[] {
  const root = landingRoot(dataDir);
  return filesUnder(root)
    .filter((path) => path.endsWith('.json') && !basename(path).startsWith('.'))
    .map((path) => relative(root, path).split(sep).join('/'))
    .sort();
}

/** Every file under a folder, at any depth; none when the folder does not exist. */
export function filesUnder(root: string): string[] {
  if (!existsSync(root)) return [];
  const files: string[] = [];
  const walk = (directory: string) => {
    for (const entry of readdirSync(directory, { withFileTypes: true })) {
      const path = join(directory, entry.name);
      if (entry.isDirectory()) walk(path);
      else files.push(path);
    }
  };
  walk(root);
  return files;
}

/** A landing the loader cannot load (not JSON, an unknown endpoint, a bad content URL, …), and why. */
export interface UnloadableLanding {
  key: string;
  reason: string;
}

/** Why a landing's text is not JSON, in JSON.parse's words; undefined when it is JSON. */
export function notJsonReason(text: string): string | undefined {
  try {
    JSON.parse(text);
    return undefined;
  } catch (error) {
    return `not JSON: ${(error as Error).message}`;
  }
}

/** A quarantined landing as a run's summary and `harvester load` list it: where it is now, and why. */
export function quarantineLine(landing: { file: string; reason: string }): string {
  return `${landing.file}: ${landing.reason}`;
}

/**
 * A run's landings in quarantine, whichever load set them aside, as quarantineLine says them: what
 * its summary lists. The reason is written first, so a quarantined landing always has one.
 */
export function quarantinedLandingsOfRun(dataDir: string, runId: string): string[] {
  return filesUnder(join(quarantineRoot(dataDir), pathSegment(runId)))
    .filter((path) => !path.endsWith('.reason') && existsSync(`${path}.reason`))
    .map((file) => quarantineLine({ file, reason: readFileSync(`${file}.reason`, 'utf8').trim() }))
    .sort();
}

/**
 * Moves a landing the loader cannot load out of the landing folder, to the same place under
 * `quarantine/`, with a `.reason` file beside it: it blocks no load, and nothing of it is lost.
 * Returns where it now is.
 */
/** Sets aside, under `quarantine/` with its reason, a landing's text that is not a file of its own (a segment's frame). */
export function quarantineText(dataDir: string, key: string, text: string, reason: string): string {
  const target = quarantineFile(dataDir, key);
  mkdirSync(dirname(target), { recursive: true });
  writeDurableFile(target, text, { what: 'quarantined landing' });
  // The reason last: the loader skips a frame once its quarantined copy has a reason beside it.
  writeDurableFile(`${target}.reason`, `${reason}\n`, { what: 'quarantine reason' });
  return target;
}

export function quarantineLanding(dataDir: string, key: string, reason: string): string {
  const target = quarantineFile(dataDir, key);
  mkdirSync(dirname(target), { recursive: true });
  // The reason first: a crash between the two leaves the landing where it was (the next load
  // quarantines it again), never a quarantined landing without its reason.
  writeDurableFile(`${target}.reason`, `${reason}\n`, { what: 'quarantine reason' });
  renameSync(landingFile(dataDir, key), target);
  return target;
}
