/**
 * The data directory's layout: every path under it is named here, and only here, so what lives
 * where is one page to read, and a second storage backend knows what it has to hold.
 *
 *   segments/<run>/<writer>-NNNNNN.seg        answers, many per file, framed (segment.ts); removed once loaded and their run is over
 *   landing/<run>/<target>/page-NNNNNN.json   answers of earlier versions, one file per page (landing.ts): loaded, then cleared;
 *                                             its path below landing/ is the answer's landing key (pageLandingKey, runStatusKey)
 *   quarantine/…                              landings the loader cannot load, each with a .reason
 *   journal/<run>/<work>.ndjson               each piece of work's billed calls (call-journal.ts); copied into the lake (call_journal) and removed by the load that clears its run's answers
 *   journal/<run>/.ended                      left when they are removed: the run is over, and no attempt claims or appends to a journal of it
 *   journal-late/<run>/<work>.ndjson          records of an ended run a woken attempt made (a charge of a call on the wire): archived and added to the run by the next load
 *   coverage/<target>.json                    how far a target's last listing reached
 *   jobs/<job>.json, jobs/by-run/<run>/<target>.json   the job registry
 *   state/credits-low.json                    the API's credits.low alert, while it stands
 *   state/store-id.json                       the data directory's identity, made once: runs carry it (store-identity.ts)
 *   state/budget-ledger-YYYY-MM.jsonl         reservations and charges against the budgets across runs, a file per UTC month (budget-ledger.ts)
 *   webhooks/secrets.json, webhooks/journal.jsonl      signing secrets and received deliveries
 *   media/<sha256[0:2]>/<sha256>              downloaded media files, content-addressed (media-store.ts): a copy for reading;
 *                                             the durable one is framed with the run's answers, then kept in the lake (media_files)
 *   lake/catalog.sqlite, lake/data/…          the warehouse: a DuckLake catalog and its Parquet files
 *   .loader/…                                 the loader's lock and work files
 *   warehouse.duckdb(.migrated)               the warehouse before DuckLake, moved into the lake once
 *   temporal.sqlite, temporal.server.json     the embedded Temporal dev server's state
 *   logs/<service>.log                        what `harvester dev` and the demo's services say
 *   distributed/…                             `harvester dev --distributed`'s PostgreSQL and MinIO (postgres/, minio/), their credentials, ports and env.sh
 *   machines/worker-N/                        the scratch data directory of each worker `harvester dev --distributed` starts
 *   .write-check-<pid>                        a starting worker's check that it can write here
 *
 * With shared storage (src/store/shared), the same names hold under s3://<bucket>/<prefix>/ for
 * segments/, landing/, quarantine/ and lake/data/ (objectKey), and the journal, coverage,
 * the job registry and the credits-low alert are rows in the PostgreSQL catalog; the data directory
 * is then the worker's scratch: a cache of the segments (each uploaded group of answers is a segment
 * object of its own, shared/shared-segments.ts) and the loader's work files.
 *
 * Landing keys are built here from target keys, which src/harvest/targets.ts names (the pure domain cannot
 * import this file). test/lint/layout-paths.test.ts fails when a path or a key is built anywhere else.
 */
import { readdir } from 'node:fs/promises';
import { basename, join, relative, sep } from 'node:path';
import type { EndpointName, Platform } from '../api-catalog/endpoints.js';
import { commentsTargetKey, itemTargetKey } from '../harvest/targets.js';

/** A path segment made only of safe characters, plus a short hash so distinct keys stay distinct. */
export function pathSegment(key: string): string {
  const safe = key.replace(/[^A-Za-z0-9_.-]+/g, '_').slice(0, 80);
  if (safe === key) return key;
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193) >>> 0;
  return `${safe}~${hash.toString(36)}`;
}

/**
 * Landing keys: a page's `<run>/<target>/page-NNNNNN.json`, a run status's `<run>/_run/status-NNNNNN.json`,
 * a media file's `<run>/_media/<sha256>.json`, built and read here only. A key is fixed by what
 * it names (run, target and page; run and sequence), so a retry lands on the same key. The run's
 * folder is the key's first part, in the landing tree of earlier versions and among the segments
 * alike; it is also a segment id's first part.
 */
export function pageLandingKey(runId: string, target: string, page: number): string {
  return [runFolderOfRun(runId), pathSegment(target), `page-${String(page).padStart(6, '0')}.json`].join('/');
}

/**
 * Run statuses sit in this folder of their run. No target's folder is named so: target keys hold a
 * `:` (`channel:tiktok:…`), which `pathSegment` replaces and marks with a hash.
 */
const RUN_FOLDER = '_run';

/** The landing key of an item's object call (its stats, transcript, download, …): page `page` of the item's target. */
export function itemLandingKey(runId: string, platform: Platform, endpoint: EndpointName, subject: string, page = 1): string {
  return pageLandingKey(runId, itemTargetKey(platform, endpoint, subject), page);
}

/** The landing key of a page of an item's comments: the same key a comments target of that URL lands under. */
export function commentsLandingKey(runId: string, platform: Platform, url: string, page: number): string {
  return pageLandingKey(runId, commentsTargetKey(platform, url), page);
}

/** A job's start call: its key in the journal, and the id of the work that starts the target's job (its results land under the target's page keys). */
export function jobStartKey(targetKey: string): string {
  return `job:${targetKey}`;
}

export function runStatusKey(runId: string, seq: number): string {
  return [runFolderOfRun(runId), RUN_FOLDER, `status-${String(seq).padStart(6, '0')}.json`].join('/');
}

export function isRunLandingKey(key: string): boolean {
  return key.split('/')[1] === RUN_FOLDER;
}

/** A run's media files, framed among its answers until loaded into the lake's `media_files`. Named as `_run` is: no target's folder. */
const MEDIA_FOLDER = '_media';

/** A media file's landing, by its run and the SHA-256 of its bytes: `<run>/_media/<sha256>.json`. */
export function mediaLandingKey(runId: string, sha256: string): string {
  return [runFolderOfRun(runId), MEDIA_FOLDER, `${sha256}.json`].join('/');
}

export function isMediaLandingKey(key: string): boolean {
  return key.split('/')[1] === MEDIA_FOLDER;
}

/** A key's first part: its run's folder (the whole key when it has one part only). */
export function runFolderOfKey(key: string): string {
  const slash = key.indexOf('/');
  return slash === -1 ? key : key.slice(0, slash);
}

/** The folder of a run's answers, by its id: the first part of each of its landing keys. */
export function runFolderOfRun(runId: string): string {
  return pathSegment(runId);
}

export function segmentRoot(dataDir: string): string {
  return join(dataDir, 'segments');
}

/** The folder of a run's segments, by the run's folder name (pathSegment of its id). */
export function runSegmentFolder(dataDir: string, runFolder: string): string {
  return join(segmentRoot(dataDir), runFolder);
}

/**
 * A segment's name within its run's folder: the process that writes it (pid, start time, a random
 * part: unique among every writer of the store) and its number among that writer's segments of the
 * run. Built and parsed here only.
 */
export interface SegmentName {
  writer: string;
  seq: number;
}

// Six digits at least: a standing worker may pass a million segments (a shared store's are small).
const SEGMENT_NAME = /^([A-Za-z0-9]+-[A-Za-z0-9]+-[A-Za-z0-9]+)-(\d{6,})\.seg$/;

export function segmentFileName(name: SegmentName): string {
  return `${name.writer}-${String(name.seq).padStart(6, '0')}.seg`;
}

/** The name of a segment file, or undefined for any other file (a temporary, a stray). */
export function parseSegmentFileName(fileName: string): SegmentName | undefined {
  const match = SEGMENT_NAME.exec(fileName);
  return match ? { writer: match[1] as string, seq: Number(match[2]) } : undefined;
}

/** A segment's identity in the lake's `loaded_segments`: `<run folder>/<file name>`. */
export function segmentId(runFolder: string, fileName: string): string {
  return `${runFolder}/${fileName}`;
}

/** A segment file of a run, by the run's folder name and the file's name (segmentFileName). */
export function runSegmentFile(dataDir: string, runFolder: string, fileName: string): string {
  return join(runSegmentFolder(dataDir, runFolder), fileName);
}

/**
 * The segment files of a run's folder (each's name, path, and identity in `loaded_segments`), in
 * name order (a writer's in the order written); other files (a temporary, a stray) are passed
 * over, and a folder that does not exist has none.
 */
export async function listRunSegments(dataDir: string, runFolder: string): Promise<{ name: string; file: string; id: string }[]> {
  const names = await readdir(runSegmentFolder(dataDir, runFolder)).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [];
    throw error;
  });
  const segments = names.filter((name) => parseSegmentFileName(name) !== undefined).sort();
  return segments.map((name) => ({ name, file: runSegmentFile(dataDir, runFolder, name), id: segmentId(runFolder, name) }));
}

/** Whether an object key (or a path) names a segment file: its last part is a segment's name. */
export function isSegmentObjectKey(key: string): boolean {
  return parseSegmentFileName(key.slice(key.lastIndexOf('/') + 1)) !== undefined;
}

export function landingRoot(dataDir: string): string {
  return join(dataDir, 'landing');
}

/** A run's folder of landing files of earlier versions, by the run's folder name. */
export function runLandingFolder(dataDir: string, runFolder: string): string {
  return join(landingRoot(dataDir), runFolder);
}

/** The file a landing key (`<run>/<target>/page-NNNNNN.json`) names. */
export function landingFile(dataDir: string, key: string): string {
  return join(landingRoot(dataDir), ...key.split('/'));
}

export function quarantineRoot(dataDir: string): string {
  return join(dataDir, 'quarantine');
}

/** A run's folder under quarantine/, by the run's folder name. */
export function runQuarantineFolder(dataDir: string, runFolder: string): string {
  return join(quarantineRoot(dataDir), runFolder);
}

/**
 * The key a file under `root` (landing/ or quarantine/) is kept under: its path below the root,
 * parts joined by `/` whatever the platform's separator. The inverse of landingFile and quarantineFile.
 */
export function keyOfFile(root: string, file: string): string {
  return relative(root, file).split(sep).join('/');
}

/** Why a quarantined landing was set aside: a file (or object) beside it, its name and `.reason`. */
export function reasonFileOf(quarantined: string): string {
  return `${quarantined}.reason`;
}

/** Whether a file (or object) under quarantine/ is a reason (reasonFileOf), not a landing. */
export function isReasonFile(path: string): boolean {
  return path.endsWith('.reason');
}

/** Where a landing the loader cannot load is kept: the same place under quarantine/. */
export function quarantineFile(dataDir: string, key: string): string {
  return join(quarantineRoot(dataDir), ...key.split('/'));
}

export function runJournalFolder(dataDir: string, runId: string): string {
  return join(dataDir, 'journal', runFolderOfRun(runId));
}

export function journalFile(dataDir: string, runId: string, workId: string): string {
  return join(runJournalFolder(dataDir, runId), `${pathSegment(workId)}${JOURNAL_SUFFIX}`);
}

/** A journal file's name ends so; the marks and claims beside it in its run's folder (.ended, .archiving, <journal>.owner) end otherwise. */
const JOURNAL_SUFFIX = '.ndjson';

export function isJournalFileName(name: string): boolean {
  return name.endsWith(JOURNAL_SUFFIX);
}

/** The work a journal file is of: its name without the suffix (the work id made safe for a path). */
export function workOfJournalFile(fileName: string): string {
  return basename(fileName, JOURNAL_SUFFIX);
}

/** Left in a run's journal folder when its journals are removed: the run is over (file-journal.ts). */
export function runJournalEndedMark(dataDir: string, runId: string): string {
  return join(runJournalFolder(dataDir, runId), '.ended');
}

/** A run's archiving mark, in its journal folder beside the journals (file-journal.ts). */
export function runJournalArchivingMark(dataDir: string, runId: string): string {
  return join(runJournalFolder(dataDir, runId), '.archiving');
}

/** Where a journal's claim (the attempt that owns it) is kept: beside the journal. */
export function journalClaimFile(journal: string): string {
  return `${journal}.owner`;
}

/** Where the late records of ended runs wait for a load (src/store/file-journal.ts). */
export function lateJournalRoot(dataDir: string): string {
  return join(dataDir, 'journal-late');
}

export function lateJournalFile(dataDir: string, runId: string, workId: string): string {
  return join(lateRunFolder(lateJournalRoot(dataDir), runFolderOfRun(runId)), `${pathSegment(workId)}${JOURNAL_SUFFIX}`);
}

/** A run's folder of late records, by the run's folder name, under the late journals' root (lateJournalRoot). */
export function lateRunFolder(lateRoot: string, runFolder: string): string {
  return join(lateRoot, runFolder);
}

/** The file in a run's folder of late records that names the run (its folder's name is the id made safe for a path). */
export function lateRunIdFile(lateFolder: string): string {
  return join(lateFolder, '.run');
}

export function coverageFile(dataDir: string, targetKey: string): string {
  return join(dataDir, 'coverage', `${pathSegment(targetKey)}.json`);
}

export function jobFile(dataDir: string, jobId: string): string {
  return join(dataDir, 'jobs', `${pathSegment(jobId)}.json`);
}

export function targetJobFile(dataDir: string, runId: string, target: string): string {
  return join(dataDir, 'jobs', 'by-run', pathSegment(runId), `${pathSegment(target)}.json`);
}

export const creditsLowFile = (dataDir: string): string => join(dataDir, 'state', 'credits-low.json');

/** When the API last accepted the key this data directory's workers use (src/cli/api-key-check.ts): not needed to restart, a lost one costs a check. */
export const apiKeyAcceptedFile = (dataDir: string): string => join(dataDir, 'state', 'api-key-accepted.json');

/** The data directory's identity, written once when first asked for: runs carry it, workers compare it. */
export function storeIdFile(dataDir: string): string {
  return join(dataDir, 'state', 'store-id.json');
}

/** The ledger of the budgets across runs (src/store/budget-ledger.ts): every process of the data directory appends to it. */
export function budgetLedgerFile(dataDir: string, utcMonth: string): string {
  return join(dataDir, 'state', `budget-ledger-${utcMonth}.jsonl`);
}

export function secretStorePath(dataDir: string): string {
  return join(dataDir, 'webhooks', 'secrets.json');
}

export function webhookJournalFile(dataDir: string): string {
  return join(dataDir, 'webhooks', 'journal.jsonl');
}

/**
 * The object key, under the store's prefix, of what `path` names in a data directory: shared
 * storage keeps the data directory's layout (for landing/, quarantine/ and lake/data/).
 */
export function objectKey(dataDir: string, path: string): string {
  return keyOfFile(dataDir, path);
}

/** The prefix of every object key under a folder of the data directory (`landing/`, `segments/<run>/`, …). */
export function objectPrefix(dataDir: string, folder: string): string {
  return `${objectKey(dataDir, folder)}/`;
}

/** The key (a landing's, a quarantined landing's) that an object under a root's prefix (objectPrefix) is kept under: its name below the prefix. */
export function keyOfObject(rootPrefix: string, object: string): string {
  return object.slice(rootPrefix.length);
}

/** The file of a data directory that holds a copy of the object `key` (the inverse of objectKey). */
export function fileOfObjectKey(dataDir: string, key: string): string {
  return join(dataDir, ...key.split('/'));
}


/** The folders of a data directory whose files are written by writeDurableFile (or were, as temporaries, by earlier versions). */
export function durablyWrittenFolders(dataDir: string): string[] {
  return ['landing', 'quarantine', 'coverage', 'jobs', 'state', 'webhooks', 'journal', 'journal-late', 'media'].map((folder) => join(dataDir, folder));
}

export function mediaFolder(dataDir: string): string {
  return join(dataDir, 'media');
}

/** A media file by the SHA-256 of its bytes (lowercase hex). */
export function mediaFile(dataDir: string, sha256: string): string {
  return join(mediaFolder(dataDir), sha256.slice(0, 2), sha256);
}

/** The warehouse's DuckLake catalog (SQLite): which tables, snapshots and data files it holds. */
export function lakeCatalogFile(dataDir: string): string {
  return join(dataDir, 'lake', 'catalog.sqlite');
}

/** The warehouse's data: Parquet files that DuckLake writes and names, under one folder per table. */
export function lakeDataFolder(dataDir: string): string {
  return join(dataDir, 'lake', 'data');
}

/** The lake's data folder as DuckLake's DATA_PATH, ending in `/`: in the data directory, or under the store's `s3://bucket/prefix/` (storageRootUrl). */
export function lakeDataPath(root: string): string {
  return root.startsWith('s3://') ? `${root}lake/data/` : `${lakeDataFolder(root)}/`;
}

/** The warehouse as one DuckDB file, before the lake: the loader moves its history into the lake once. */
export function legacyWarehouseFiles(dataDir: string): { work: string; published: string } {
  return { work: join(loaderFolder(dataDir), 'work.duckdb'), published: join(dataDir, 'warehouse.duckdb') };
}

/** The loader's own files: its lock and work database, load packages, and the check of unreadable landings. */
export function loaderFolder(dataDir: string): string {
  return join(dataDir, '.loader');
}

/**
 * The loader's own DuckDB database: where a batch is staged before it merges into the lake, and
 * whose file lock keeps a second loader of this data directory waiting.
 */
export function loaderDatabasePath(dataDir: string): string {
  return join(loaderFolder(dataDir), 'loader.duckdb');
}

/** Where a load writes the journals of ended runs for the lake to read (src/warehouse/journal-archive.ts). */
export function journalArchiveFolder(dataDir: string): string {
  return join(loaderFolder(dataDir), 'journals');
}

/** Where a load's staged batch spills when it outgrows the loader's memory limit. */
export function loaderSpillFolder(dataDir: string): string {
  return join(loaderFolder(dataDir), 'spill');
}

/** When the lake was last maintained (its modification time), for the daily maintenance after a run's load. */
export function maintenanceMarkFile(dataDir: string): string {
  return join(loaderFolder(dataDir), 'maintained');
}

export function loadPackageFolder(dataDir: string, turn: number): string {
  return join(loaderFolder(dataDir), `package-${turn}`);
}

/** A load package's file of one shape of landing (`list`, `object`, `run`, `media`): newline-delimited JSON. */
export function loadPackageFile(packageFolder: string, shape: string): string {
  return join(packageFolder, `${shape}.jsonl`);
}

/** A load's file of journal records for the lake to read: `records` of ended runs, or `late` records of runs archived before. */
export function journalArchiveFile(dataDir: string, which: 'records' | 'late'): string {
  return join(journalArchiveFolder(dataDir), `${which}.jsonl`);
}

export function loaderCheckFolder(dataDir: string): string {
  return join(loaderFolder(dataDir), 'check');
}

export const devServerDbFile = (dataDir: string): string => join(dataDir, 'temporal.sqlite');
export const devServerStateFile = (dataDir: string): string => join(dataDir, 'temporal.server.json');

export const logsFolder = (dataDir: string): string => join(dataDir, 'logs');

/** The log of one service `harvester dev` starts, in the logs folder (logsFolder). */
export function serviceLogFile(logsDir: string, service: string): string {
  return join(logsDir, `${service}.log`);
}

/** What `harvester dev --distributed` keeps of its own services: their folder (sharedServiceFolders), credentials, ports and environment. */
export function distributedFiles(dataDir: string): { folder: string; credentials: string; ports: string; env: string } {
  const folder = join(dataDir, 'distributed');
  return { folder, credentials: join(folder, 'credentials.json'), ports: join(folder, 'ports.json'), env: join(folder, 'env.sh') };
}

/** The folders of the shared services started under `folder` (distributedFolder, or a test's own). */
export function sharedServiceFolders(folder: string): { postgres: string; minio: string } {
  return { postgres: join(folder, 'postgres'), minio: join(folder, 'minio') };
}

/** Where a shared service keeps its data, within its folder (sharedServiceFolders). */
export function serviceDataFolder(serviceFolder: string): string {
  return join(serviceFolder, 'data');
}

/** The scratch data directory of the `number`th worker (from 1) `harvester dev --distributed` starts. */
export function workerMachineFolder(dataDir: string, number: number): string {
  return join(dataDir, 'machines', `worker-${number}`);
}

/** The empty file a starting worker writes and removes, to learn whether it can write here. */
export function writeProbeFile(dataDir: string, pid: number): string {
  return join(dataDir, `.write-check-${pid}`);
}
