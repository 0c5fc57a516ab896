/**
 * The normalize stage of a load, in SQL: a load package's landings (pages as the API sent them,
 * and run statuses) become one staged relation per warehouse table, `stage_<table>`, each row
 * carrying the `_landing` it came from. DuckDB reads and reshapes the pages itself; the merge into
 * the warehouse tables is merge.ts's. Pure functions of the landings, so loading the same landing
 * twice gives the same rows.
 */
import { rmSync } from 'node:fs';
import type { DuckDBConnection } from '@duckdb/node-api';
import { CONTENT_URL_KINDS, CONTENT_URL_PATTERNS } from '../api-catalog/content-urls.js';
import { ENDPOINTS, PLATFORMS, type EndpointSpec } from '../api-catalog/endpoints.js';
import { notJsonReason, type UnloadableLanding } from '../store/landing.js';
import { sqlString, withDefaultDatabase } from './duckdb.js';
import { LAKE, type LakeConnection } from './lake.js';
import { extract, type LoadPackage, type PendingAnswer } from './extract.js';
import { readFrameText } from '../store/segment.js';
import { STAGED_TABLES } from './schema.js';
import { RAW_COLUMNS, type LandingShape } from './raw-columns.js';
import { loaderCheckFolder } from '../store/layout.js';

/** DuckDB's reader of one shape's package file; without `data` when only the pages themselves are wanted. */
function readJson(file: string, shape: LandingShape, withData = true): string {
  const columns = Object.entries(RAW_COLUMNS[shape])
    .filter(([name]) => withData || name !== 'data')
    .map(([name, type]) => `${name}: ${sqlString(type)}`)
    .join(', ');
  return `read_json(${sqlString(file)}, format = 'newline_delimited', columns = {${columns}})`;
}

/** Endpoint names (of either platform) the catalog describes so. */
const endpointNames = (test: (spec: EndpointSpec) => boolean) => [...new Set(ENDPOINTS.filter(test).map((spec) => spec.name))];
/** Channel lists, with the kind of item each lists (the API's meta.item). */
export const LIST_KINDS = Object.fromEntries(ENDPOINTS.filter((spec) => spec.shape === 'list' && spec.param === 'handle').map((spec) => [spec.name, spec.item as string]));
/** Searches, with the kind the warehouse records for their hits: the endpoint's name without `-search` (`hashtag`, `reels`), and `search` for the keyword search. */
export const SEARCH_KINDS: Record<string, string> = Object.fromEntries(
  ENDPOINTS.filter((spec) => spec.shape === 'list' && spec.param === 'query').map((spec) => [spec.name, spec.name === 'search' ? 'search' : spec.name.replace(/-search$/, '')]),
);
const LIST_ENDPOINTS = endpointNames((spec) => spec.shape === 'list');
const OBJECT_ENDPOINTS = endpointNames((spec) => spec.shape === 'object');
/** Endpoints whose subject is the content URL in `params.url`. */
const URL_ENDPOINTS = endpointNames((spec) => spec.param === 'url');

const inList = (values: string[]) => values.map(sqlString).join(', ');
const caseOf = (expression: string, cases: Record<string, string>, otherwise = 'NULL') =>
  `CASE ${expression} ${Object.entries(cases).map(([when, then]) => `WHEN ${sqlString(when)} THEN ${then}`).join(' ')} ELSE ${otherwise} END`;

/** A part of the content URL's match (1: the path word that gives the kind, 2: the item id); '' when it is none. */
function contentUrlPart(url: string, group: 1 | 2): string {
  return `coalesce(${caseOf('platform', Object.fromEntries(PLATFORMS.map((platform) => [platform, `regexp_extract(${url}, ${sqlString(CONTENT_URL_PATTERNS[platform])}, ${group})`])))}, '')`;
}

/** Pages of `source` with the columns every page gets: platform and endpoint name, whether it came from the cache, and its subject. */
const withPageColumns = (source: string) => `
  SELECT *, ${contentUrlPart("params->>'url'", 2)} AS subject_id, ${caseOf(contentUrlPart("params->>'url'", 1), Object.fromEntries(Object.entries(CONTENT_URL_KINDS).map(([word, kind]) => [word, sqlString(kind)])))} AS subject_kind
  FROM (SELECT *, split_part(endpoint, '/', 1) AS platform, split_part(endpoint, '/', 2) AS name,
    CASE WHEN call.cache IS NULL THEN NULL ELSE call.cache = 'HIT' END AS from_cache FROM ${source})`;

/**
 * Reads a load package: the pages of each shape into `raw_<shape>`, and the items of list pages,
 * unnested as they are read, into `listed` (they feed items, item_metrics, search_hits and
 * comments). Unnesting while reading spares keeping every page's item list a second time.
 */
function readPackageSql(files: Record<LandingShape, string>): string[] {
  return [
    `CREATE OR REPLACE TEMP TABLE raw_list AS SELECT * FROM ${readJson(files.list, 'list', false)}`,
    `CREATE OR REPLACE TEMP TABLE raw_object AS SELECT * FROM ${readJson(files.object, 'object')}`,
    `CREATE OR REPLACE TEMP TABLE raw_run AS SELECT * FROM ${readJson(files.run, 'run')}`,
    // Media files framed with the answers: their bytes for the lake's media_files (merge.ts), not raw answers.
    `CREATE OR REPLACE TEMP TABLE raw_media AS SELECT _landing, run_id, sha256, mime_type, from_base64(content_base64) AS content FROM ${readJson(files.media, 'media')}`,
    // Every answer as it came, whatever its columns: kept in the lake (raw_answers) for a rebuild.
    `CREATE OR REPLACE TEMP TABLE stage_raw_answers AS
      SELECT answer->>'_landing' AS landing, answer->>'run_id' AS run_id, answer->>'kind' AS kind, answer->>'request_id' AS request_id,
        answer->>'endpoint' AS endpoint, answer->'params' AS params, TRY_CAST(answer->>'observed_at' AS TIMESTAMPTZ) AS observed_at, answer
      FROM read_ndjson_objects([${[files.list, files.object, files.run].map(sqlString).join(', ')}]) AS objects(answer)`,
    `CREATE OR REPLACE TEMP TABLE listed AS
      SELECT _landing, platform, name, endpoint, run_id, request_id, observed_at, from_cache, params->>'query' AS query, params->>'handle' AS handle,
        subject_id, coalesce(rank_offset, 0) AS rank_offset, unnest(data) AS item, generate_subscripts(data, 1) AS position
      FROM (${withPageColumns(readJson(files.list, 'list'))})`,
  ];
}

/**
 * Builds `stage_<table>` for every staged table from what `readPackageSql` read, then
 * `staged_rows` (the rows each landing staged in each table) and `stage_loaded_landings`, the
 * batch's record for `loaded_landings`.
 */
const STAGE_SQL = [
  `CREATE OR REPLACE TEMP VIEW pages_list AS ${withPageColumns('raw_list')}`,
  `CREATE OR REPLACE TEMP VIEW pages_object AS ${withPageColumns('raw_object')}`,
  `CREATE OR REPLACE TEMP VIEW stage_items AS
    SELECT _landing, platform, item.id AS item_id, ${caseOf('name', Object.fromEntries(Object.entries(LIST_KINDS).map(([name, kind]) => [name, sqlString(kind)])), "CASE platform WHEN 'tiktok' THEN 'video' ELSE 'reel' END")} AS kind,
      item.url AS url, item.caption AS caption, CASE WHEN name IN (${inList(Object.keys(LIST_KINDS))}) THEN handle ELSE item.author.handle END AS author_handle,
      item.posted_at AS posted_at, observed_at AS seen_at, request_id
    FROM listed WHERE name <> 'comments'
    UNION ALL
    SELECT _landing, platform, coalesce(data.entity_id, subject_id), subject_kind, data.url, NULL, data.author.handle, data.posted_at, observed_at, request_id
    FROM pages_object WHERE name = 'stats'`,
  `CREATE OR REPLACE TEMP VIEW stage_item_metrics AS
    SELECT _landing, platform, item.id AS item_id, observed_at, item.metrics.views AS views, item.metrics.likes AS likes, item.metrics.comments AS comments,
      -- No list item carries shares (src/api-catalog/resources.ts): only stats does.
      NULL::BIGINT AS shares, from_cache, endpoint AS source_endpoint, request_id, run_id
    FROM listed WHERE name <> 'comments'
    UNION ALL
    SELECT _landing, platform, coalesce(data.entity_id, subject_id), observed_at,
      -- A photo post has no views: stats says 0 where channel-posts says nothing; both are null here.
      CASE WHEN platform = 'instagram' AND subject_kind = 'post' THEN NULL ELSE data.metrics.views END,
      data.metrics.likes, data.metrics.comments, data.metrics.shares, from_cache, endpoint, request_id, run_id
    FROM pages_object WHERE name = 'stats'`,
  `CREATE OR REPLACE TEMP VIEW stage_search_hits AS
    SELECT _landing, platform, coalesce(query, '') AS query, ${caseOf('name', Object.fromEntries(Object.entries(SEARCH_KINDS).map(([name, kind]) => [name, sqlString(kind)])))} AS kind,
      (rank_offset + position)::INTEGER AS rank, item.id AS item_id, observed_at, request_id, run_id
    FROM listed WHERE name IN (${inList(Object.keys(SEARCH_KINDS))})`,
  `CREATE OR REPLACE TEMP VIEW stage_comments AS
    SELECT _landing, platform, item.id AS comment_id, subject_id AS item_id, item.text AS text, item.author.handle AS author_handle, item.likes AS likes,
      item.posted_at AS posted_at, observed_at AS seen_at, request_id
    FROM listed WHERE name = 'comments'`,
  `CREATE OR REPLACE TEMP VIEW stage_accounts AS
    SELECT _landing, platform, data.handle AS handle, data.name AS name, data.bio AS bio, data.verified AS verified, data.metrics.followers AS followers,
      data.metrics.following AS following, data.metrics.posts AS posts, observed_at AS seen_at, request_id
    FROM pages_object WHERE name = 'channel-stats'`,
  `CREATE OR REPLACE TEMP VIEW stage_account_metrics AS
    SELECT _landing, platform, data.handle AS handle, observed_at, data.metrics.followers AS followers, data.metrics.following AS following,
      data.metrics.posts AS posts, from_cache, request_id, run_id
    FROM pages_object WHERE name = 'channel-stats'`,
  `CREATE OR REPLACE TEMP VIEW stage_transcripts AS
    SELECT _landing, platform, subject_id AS item_id, data.language AS language, data.source AS source, data.text AS text, observed_at AS fetched_at, request_id
    FROM pages_object WHERE name = 'transcript'`,
  `CREATE OR REPLACE TEMP VIEW stage_transcript_segments AS
    SELECT _landing, platform, item_id, (position - 1)::INTEGER AS seq, segment.start AS start_seconds, segment."end" AS end_seconds, segment.text AS text
    FROM (SELECT _landing, platform, subject_id AS item_id, unnest(data.segments) AS segment, generate_subscripts(data.segments, 1) AS position
      FROM pages_object WHERE name = 'transcript')`,
  `CREATE OR REPLACE TEMP VIEW stage_summaries AS
    SELECT _landing, platform, subject_id AS item_id, data.language AS language, data.summary AS summary, observed_at AS fetched_at, request_id
    FROM pages_object WHERE name = 'summary'`,
  `CREATE OR REPLACE TEMP VIEW stage_downloads AS
    SELECT _landing, platform, subject_id AS item_id, data.media_url AS media_url, data.mime_type AS mime_type, data.expires_at AS expires_at, observed_at, request_id,
      data.media.sha256 AS media_sha256, data.media.bytes AS media_bytes
    FROM pages_object WHERE name = 'download'`,
  `CREATE OR REPLACE TEMP VIEW stage_api_calls AS
    SELECT _landing, call.request_id AS request_id, run_id, harvest, target, endpoint, params, call.units AS units, call.credits AS credits,
      call.cache AS cache_status, call.job_id AS job_id, observed_at AS called_at
    FROM (SELECT _landing, call, run_id, harvest, target, endpoint, params, observed_at FROM raw_list
      UNION ALL SELECT _landing, call, run_id, harvest, target, endpoint, params, observed_at FROM raw_object)
    WHERE call IS NOT NULL`,
  `CREATE OR REPLACE TEMP VIEW stage_harvest_runs AS
    SELECT _landing, run_id, harvest, status, seq, started_at, finished_at, budget_credits, credits_spent, items_landed, error, enrichments, answers_quarantined FROM raw_run`,
  // Text repaired as it landed (src/store/text-repair.ts): which answer, which field, what was replaced.
  `CREATE OR REPLACE TEMP VIEW stage_text_repairs AS
    SELECT _landing, _landing AS landing, run_id, request_id, endpoint, repair.path AS field_path, repair.replaced, observed_at
    FROM (SELECT _landing, run_id, request_id, endpoint, observed_at, unnest(repairs) AS repair FROM raw_list WHERE repairs IS NOT NULL
      UNION ALL SELECT _landing, run_id, request_id, endpoint, observed_at, unnest(repairs) FROM raw_object WHERE repairs IS NOT NULL)`,
  // A run's final status lists all its failed calls: a retry's final status replaces the list.
  `CREATE OR REPLACE TEMP VIEW stage_failed_calls AS
    SELECT _landing, run_id, seq, failed.endpoint, failed.subject, failed.reason, failed.request_id, failed."at" AS failed_at
    FROM (SELECT _landing, run_id, seq, unnest(failed_calls) AS failed FROM raw_run WHERE failed_calls IS NOT NULL)`,
  // What each landing staged in each table, counted once: the merge takes the tables with rows
  // from it (merge.ts's tablesWithWork) and the landings' record their rows. Asking each of the
  // sixteen views on its own (EXISTS) and then counting them again cost twice, mostly in binding.
  `CREATE OR REPLACE TEMP TABLE staged_rows AS
  SELECT staged, _landing, count(*) AS rows
  FROM (${STAGED_TABLES.map((table) => `SELECT '${table}' AS staged, _landing FROM stage_${table}`).join(' UNION ALL ')})
  GROUP BY staged, _landing`,
  // Every landing of the batch with the rows it contributed (its key, run and row count).
  `CREATE OR REPLACE TEMP VIEW stage_loaded_landings AS
  SELECT landings._landing AS landing, landings.run_id, coalesce(staged.rows, 0) AS rows
  FROM (SELECT _landing, run_id FROM raw_list UNION ALL SELECT _landing, run_id FROM raw_object UNION ALL SELECT _landing, run_id FROM raw_run
    UNION ALL SELECT _landing, run_id FROM raw_media) AS landings
  LEFT JOIN (SELECT _landing, sum(rows) AS rows FROM staged_rows GROUP BY _landing) AS staged
  USING (_landing)`,
];

/**
 * Finds the landings of the batch that cannot be normalized: an endpoint with no normalizer for its
 * shape, or a content URL in `params.url` that is none. One row (landing, endpoint, problem) per
 * landing at fault, so a batch with several is rolled back once, not once for each.
 */
const CHECK_SQL = `
  SELECT * FROM (
    SELECT _landing, endpoint, 'no normalizer for a page of this endpoint with a list of items' AS problem FROM pages_list
      WHERE platform NOT IN (${inList([...PLATFORMS])}) OR name NOT IN (${inList(LIST_ENDPOINTS)})
    UNION ALL
    SELECT _landing, endpoint, 'no normalizer for a page of this endpoint with one resource' FROM pages_object
      WHERE platform NOT IN (${inList([...PLATFORMS])}) OR name NOT IN (${inList(OBJECT_ENDPOINTS)})
    UNION ALL
    SELECT _landing, endpoint, 'params.url ' || coalesce(to_json(params->>'url')::VARCHAR, '(missing)') || ' is not a ' || platform || ' content URL'
      FROM (SELECT _landing, endpoint, params, platform, name, subject_id FROM pages_list UNION ALL SELECT _landing, endpoint, params, platform, name, subject_id FROM pages_object)
      WHERE name IN (${inList(URL_ENDPOINTS)}) AND subject_id = ''
    UNION ALL
    SELECT _landing, 'media', 'the media file does not hash to its name ' || coalesce(sha256, '(missing)') FROM raw_media WHERE sha256(content) IS DISTINCT FROM sha256)
  QUALIFY row_number() OVER (PARTITION BY _landing ORDER BY problem) = 1`;

/**
 * Normalizes a load package: reads it into DuckDB and stages its rows, `stage_<table>` for every
 * warehouse table, ready to merge. Throws `UnloadableLandingsError`, naming each landing at fault
 * and why, when any landing of the package cannot be read or normalized.
 */
export async function normalize(lake: LakeConnection, dataDir: string, loadPackage: LoadPackage): Promise<void> {
  const { connection } = lake;
  // Its statements name only temporary tables and views: they bind faster from the connection's own database.
  await withDefaultDatabase(connection, lake.home, LAKE, async () => {
    try {
      for (const statement of readPackageSql(loadPackage.files)) await connection.run(statement);
    } catch (error) {
      throw await unreadableLandings(connection, dataDir, loadPackage.answers, error as Error);
    }
    for (const statement of STAGE_SQL) await connection.run(statement);
    const problems = (await connection.runAndReadAll(CHECK_SQL)).getRowObjectsJson();
    if (problems.length > 0) throw new UnloadableLandingsError(problems.map((problem) => ({ key: String(problem._landing), reason: `${String(problem.problem)} (${String(problem.endpoint)})` })));
  });
}

/** Landings that cannot be loaded; nothing of the batch that met them was loaded. */
export class UnloadableLandingsError extends Error {
  override name = 'UnloadableLandingsError';
  constructor(readonly landings: UnloadableLanding[]) {
    super(landings.map((landing) => `landing ${landing.key} cannot be loaded: ${landing.reason}`).join('; '));
  }
}

/**
 * DuckDB could not read a batch's package: finds the landings at fault by reading halves of the
 * batch (each in a package of its own) until each failing part is one landing. A landing at fault
 * costs about two more reads of the batch, only when a batch fails, and nothing depends on how
 * DuckDB words its errors or numbers the package's lines.
 * When no landing fails alone (memory ran out, say), the batch's error is reported as it is.
 */
async function unreadableLandings(connection: DuckDBConnection, dataDir: string, answers: PendingAnswer[], error: Error): Promise<Error> {
  const directory = loaderCheckFolder(dataDir);
  const readFails = async (part: PendingAnswer[]): Promise<string | undefined> => {
    const loadPackage = await extract(part, directory);
    try {
      for (const statement of readPackageSql(loadPackage.files)) await connection.run(statement);
      return undefined;
    } catch (partError) {
      return (partError as Error).message;
    }
  };
  const halves = (part: PendingAnswer[]) => [part.slice(0, Math.ceil(part.length / 2)), part.slice(Math.ceil(part.length / 2))];
  const find = async (part: PendingAnswer[]): Promise<UnloadableLanding[]> => {
    const failure = await readFails(part);
    if (failure === undefined) return [];
    const answer = part[0] as PendingAnswer;
    if (part.length === 1) return [{ key: answer.key, reason: notJsonReason(await readFrameText(answer.file, { textOffset: answer.offset, textLength: answer.length })) ?? duckdbReason(failure) }];
    const found: UnloadableLanding[] = [];
    for (const side of halves(part)) found.push(...(await find(side)));
    return found;
  };
  try {
    // The whole batch is known to fail: its halves are where the search starts.
    const landings: UnloadableLanding[] = [];
    for (const part of answers.length === 1 ? [answers] : halves(answers)) landings.push(...(await find(part)));
    if (landings.length > 0) return new UnloadableLandingsError(landings);
    return new Error(`landings ${answers[0]?.key} to ${answers.at(-1)?.key} (${answers.length}) cannot be loaded: ${error.message}`, { cause: error });
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}

/** DuckDB's reason for not reading a one-landing package, without the package's file name and line. */
function duckdbReason(message: string): string {
  return (message.split('\n')[0] ?? '').replace(/ in file "[^"]*",?/, '').replace(/,? (at byte \d+ )?in line \d+/, '');
}
