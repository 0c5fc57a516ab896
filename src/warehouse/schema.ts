/**
 * The warehouse schema: natural keys (platform plus id), latest state in `accounts`, `items` and
 * `comments`, and history as one row per observation in `account_metrics` and `item_metrics`.
 * docs/data-dictionary.md documents every column; a test holds the two together.
 *
 * No table has a primary key: DuckLake, the warehouse's table format, has none. `loaded_landings`
 * is the exactly-once record, one row per landing, written in the same transaction (one snapshot)
 * as the landing's rows, by the only writer (the loader, one at a time per data directory).
 * Append-only tables (observations, search hits, downloads, api_calls) therefore cannot repeat a
 * row. Latest-state tables keep one row per natural key because the loader merges each batch,
 * grouped by key, into them: an upsert of one row per key (merge.ts, upsert).
 */

export const TABLES_DDL = [
  `CREATE TABLE IF NOT EXISTS accounts (
    platform VARCHAR NOT NULL, handle VARCHAR NOT NULL, name VARCHAR, bio VARCHAR, verified BOOLEAN,
    followers BIGINT, following BIGINT, posts BIGINT,
    first_seen_at TIMESTAMPTZ NOT NULL, last_seen_at TIMESTAMPTZ NOT NULL, request_id VARCHAR)`,
  `CREATE TABLE IF NOT EXISTS account_metrics (
    platform VARCHAR NOT NULL, handle VARCHAR NOT NULL, observed_at TIMESTAMPTZ NOT NULL,
    followers BIGINT, following BIGINT, posts BIGINT, from_cache BOOLEAN,
    request_id VARCHAR NOT NULL, run_id VARCHAR NOT NULL)`,
  `CREATE TABLE IF NOT EXISTS items (
    platform VARCHAR NOT NULL, item_id VARCHAR NOT NULL, kind VARCHAR NOT NULL, url VARCHAR, caption VARCHAR,
    author_handle VARCHAR, posted_at TIMESTAMPTZ,
    first_seen_at TIMESTAMPTZ NOT NULL, last_seen_at TIMESTAMPTZ NOT NULL, request_id VARCHAR)`,
  `CREATE TABLE IF NOT EXISTS item_metrics (
    platform VARCHAR NOT NULL, item_id VARCHAR NOT NULL, observed_at TIMESTAMPTZ NOT NULL,
    views BIGINT, likes BIGINT, comments BIGINT, shares BIGINT, from_cache BOOLEAN,
    source_endpoint VARCHAR NOT NULL, request_id VARCHAR NOT NULL, run_id VARCHAR NOT NULL)`,
  `CREATE TABLE IF NOT EXISTS comments (
    platform VARCHAR NOT NULL, comment_id VARCHAR NOT NULL, item_id VARCHAR NOT NULL, text VARCHAR,
    author_handle VARCHAR, likes BIGINT, posted_at TIMESTAMPTZ,
    first_seen_at TIMESTAMPTZ NOT NULL, last_seen_at TIMESTAMPTZ NOT NULL, request_id VARCHAR)`,
  // Warehouses made before latest-state rows carried the call that last updated them: the column
  // is added, null on the rows they had, and set by the next observation of each.
  ...['accounts', 'items', 'comments'].map((table) => `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS request_id VARCHAR`),
  `CREATE TABLE IF NOT EXISTS search_hits (
    platform VARCHAR NOT NULL, query VARCHAR NOT NULL, kind VARCHAR NOT NULL, rank INTEGER NOT NULL,
    item_id VARCHAR NOT NULL, observed_at TIMESTAMPTZ NOT NULL, request_id VARCHAR NOT NULL, run_id VARCHAR NOT NULL)`,
  `CREATE TABLE IF NOT EXISTS transcripts (
    platform VARCHAR NOT NULL, item_id VARCHAR NOT NULL, language VARCHAR, source VARCHAR, text VARCHAR,
    fetched_at TIMESTAMPTZ NOT NULL, request_id VARCHAR NOT NULL)`,
  `CREATE TABLE IF NOT EXISTS transcript_segments (
    platform VARCHAR NOT NULL, item_id VARCHAR NOT NULL, seq INTEGER NOT NULL,
    start_seconds DOUBLE, end_seconds DOUBLE, text VARCHAR)`,
  `CREATE TABLE IF NOT EXISTS summaries (
    platform VARCHAR NOT NULL, item_id VARCHAR NOT NULL, language VARCHAR, summary VARCHAR,
    fetched_at TIMESTAMPTZ NOT NULL, request_id VARCHAR NOT NULL)`,
  `CREATE TABLE IF NOT EXISTS downloads (
    platform VARCHAR NOT NULL, item_id VARCHAR NOT NULL, media_url VARCHAR, mime_type VARCHAR,
    expires_at TIMESTAMPTZ, observed_at TIMESTAMPTZ NOT NULL, request_id VARCHAR NOT NULL,
    media_sha256 VARCHAR, media_bytes BIGINT)`,
  // Warehouses made before media files were fetched into the store.
  ...['media_sha256 VARCHAR', 'media_bytes BIGINT'].map((column) => `ALTER TABLE downloads ADD COLUMN IF NOT EXISTS ${column}`),
  // Downloaded media files, one row per SHA-256 of their bytes (downloads.media_sha256), loaded from
  // the frames the run's answers came with (src/store/media-store.ts); never derived, so a rebuild keeps them.
  `CREATE TABLE IF NOT EXISTS media_files (
    sha256 VARCHAR NOT NULL, mime_type VARCHAR, bytes BIGINT NOT NULL, content BLOB NOT NULL,
    run_id VARCHAR NOT NULL, loaded_at TIMESTAMPTZ NOT NULL)`,
  `CREATE TABLE IF NOT EXISTS api_calls (
    request_id VARCHAR NOT NULL, run_id VARCHAR NOT NULL, harvest VARCHAR, target VARCHAR,
    endpoint VARCHAR NOT NULL, params JSON, units BIGINT NOT NULL, credits BIGINT NOT NULL,
    cache_status VARCHAR, job_id VARCHAR, called_at TIMESTAMPTZ NOT NULL)`,
  `CREATE TABLE IF NOT EXISTS harvest_runs (
    run_id VARCHAR NOT NULL, harvest VARCHAR NOT NULL, status VARCHAR NOT NULL,
    started_at TIMESTAMPTZ NOT NULL, finished_at TIMESTAMPTZ, budget_credits BIGINT, credits_spent BIGINT,
    items_landed BIGINT, error VARCHAR, enrichments VARCHAR[])`,
  // Warehouses made before runs recorded the enrichments their harvest asked for, and their answers left in quarantine.
  `ALTER TABLE harvest_runs ADD COLUMN IF NOT EXISTS enrichments VARCHAR[]`,
  `ALTER TABLE harvest_runs ADD COLUMN IF NOT EXISTS answers_quarantined BIGINT`,

  // A run's credits corrected after its end by late records (a charge of a call on the wire when
  // its worker froze): included in credits_spent, by this much (src/warehouse/journal-archive.ts).
  `ALTER TABLE harvest_runs ADD COLUMN IF NOT EXISTS credits_late BIGINT`,
  `CREATE TABLE IF NOT EXISTS failed_calls (
    run_id VARCHAR NOT NULL, endpoint VARCHAR NOT NULL, subject VARCHAR NOT NULL, reason VARCHAR NOT NULL,
    request_id VARCHAR, failed_at TIMESTAMPTZ NOT NULL)`,
  // Text the API sent that was not well-formed Unicode (a lone surrogate, a NUL), replaced by U+FFFD
  // as it landed (src/store/text-repair.ts): one row per answer and field.
  `CREATE TABLE IF NOT EXISTS text_repairs (
    landing VARCHAR NOT NULL, run_id VARCHAR NOT NULL, request_id VARCHAR, endpoint VARCHAR NOT NULL,
    field_path VARCHAR NOT NULL, replaced VARCHAR[] NOT NULL, observed_at TIMESTAMPTZ)`,
  `CREATE TABLE IF NOT EXISTS loaded_landings (
    landing VARCHAR NOT NULL, run_id VARCHAR NOT NULL, rows BIGINT NOT NULL, loaded_at TIMESTAMPTZ NOT NULL)`,
  // Every answer the harvest paid for (and every run status), as landed, in the snapshot of the rows
  // it made: `harvester rebuild` re-derives the tables from it, and a column added later is filled from it.
  `CREATE TABLE IF NOT EXISTS raw_answers (
    landing VARCHAR NOT NULL, run_id VARCHAR NOT NULL, kind VARCHAR NOT NULL, request_id VARCHAR, endpoint VARCHAR,
    params JSON, observed_at TIMESTAMPTZ, answer JSON NOT NULL, loaded_at TIMESTAMPTZ NOT NULL)`,
  // Schema drift: fields answers carried beyond their resource's schema, by run, endpoint and path,
  // per load batch (schema-drift.ts says which answers are compared, and what each contract does).
  `CREATE TABLE IF NOT EXISTS schema_drift (
    run_id VARCHAR NOT NULL, endpoint VARCHAR NOT NULL, field_path VARCHAR NOT NULL,
    first_seen_at TIMESTAMPTZ NOT NULL, last_seen_at TIMESTAMPTZ NOT NULL, answers BIGINT NOT NULL)`,
  // What the load did with the field, by its harvest's schema contract (evolve, freeze, discard);
  // null in rows recorded before contracts existed, which were all evolve.
  `ALTER TABLE schema_drift ADD COLUMN IF NOT EXISTS contract VARCHAR`,
  // The call journals of runs over for good, record by record, copied by the load that cleared their
  // answers (journal-archive.ts): a run's ledger, beside the rows it paid for.
  `CREATE TABLE IF NOT EXISTS call_journal (
    run_id VARCHAR NOT NULL, work VARCHAR NOT NULL, seq BIGINT NOT NULL, record JSON NOT NULL, archived_at TIMESTAMPTZ NOT NULL)`,
  // How far each segment of answers was loaded (src/store/segment.ts), in the snapshot of the rows
  // its frames made: a load reads a segment from there on. A row per segment and batch.
  `CREATE TABLE IF NOT EXISTS loaded_segments (
    segment VARCHAR NOT NULL, run_id VARCHAR NOT NULL, end_offset BIGINT NOT NULL, loaded_at TIMESTAMPTZ NOT NULL)`,
];

/**
 * Tables whose rows are whole bodies of any size (an answer as it came, a media file's bytes): never
 * inlined in the catalog, whatever the writer's inlining limit (lake.ts, inliningRowLimit), so each
 * insert writes a Parquet file. DuckLake 1.5.5 writes inlined rows into the SQLite catalog at its
 * commit at about 20 MB a second: 400 answers of 20 KB made a commit take 2.3 s as inlined rows and
 * 26 ms as a file (with two fsyncs, lake-sync.ts). The other tables' rows are small (a transcript's
 * text is a few KB), and inlining them saves each load a file and two fsyncs per table: with
 * transcripts and summaries here too, the demo's run made 92-95 fsyncs against its budget of 97.6.
 */
export const NEVER_INLINED: readonly string[] = ['raw_answers', 'media_files'];

/** The shortest interval `item_growth` measures growth over, in hours (the report states it). */
export const ITEM_GROWTH_MIN_HOURS = 1;

export const VIEWS_DDL = [
  `CREATE OR REPLACE VIEW latest_item_metrics AS
    SELECT * FROM item_metrics
    QUALIFY row_number() OVER (PARTITION BY platform, item_id ORDER BY observed_at DESC, request_id DESC) = 1`,
  // Growth over at least ITEM_GROWTH_MIN_HOURS: observations minutes apart (a listing's and its
  // stats call's) made rates of tens of thousands of views an hour out of a handful of views.
  // Observations from the API's cache are left out: their counts may be older than their time.
  `CREATE OR REPLACE VIEW item_growth AS
    WITH fresh AS (SELECT * FROM item_metrics WHERE from_cache IS NOT TRUE)
    SELECT m.platform, m.item_id, m.observed_at, m.views, m.likes,
      m.views - p.views AS views_delta,
      m.likes - p.likes AS likes_delta,
      epoch(m.observed_at - p.observed_at) / 3600.0 AS hours_since_previous
    FROM fresh m ASOF LEFT JOIN fresh p
      ON m.platform = p.platform AND m.item_id = p.item_id AND m.observed_at - INTERVAL ${ITEM_GROWTH_MIN_HOURS} HOUR >= p.observed_at`,
  // An item's counts at fixed ages after posting, interpolated in time between the fresh
  // observations just before and just after each age (or the one at it); an age with no
  // observation on either side has no row: never extrapolated.
  `CREATE OR REPLACE VIEW item_metrics_at_age AS
    WITH fresh AS (SELECT * FROM item_metrics WHERE from_cache IS NOT TRUE),
    ages AS (SELECT * FROM (VALUES ('1h', 1), ('6h', 6), ('1d', 24), ('3d', 72), ('7d', 168), ('14d', 336), ('30d', 720)) AS a(age, age_hours)),
    wanted AS (SELECT i.platform, i.item_id, a.age, a.age_hours, i.posted_at + to_hours(a.age_hours) AS aged_at FROM items i CROSS JOIN ages a WHERE i.posted_at IS NOT NULL),
    before AS (SELECT w.*, b.observed_at AS before_at, b.views AS before_views, b.likes AS before_likes, b.comments AS before_comments, b.shares AS before_shares
      FROM wanted w ASOF JOIN fresh b ON w.platform = b.platform AND w.item_id = b.item_id AND w.aged_at >= b.observed_at),
    bracketed AS (SELECT w.*, a.observed_at AS after_at, a.views AS after_views, a.likes AS after_likes, a.comments AS after_comments, a.shares AS after_shares,
        CASE WHEN a.observed_at = w.before_at THEN 0 ELSE epoch(w.aged_at - w.before_at) / epoch(a.observed_at - w.before_at) END AS f
      FROM before w ASOF JOIN fresh a ON w.platform = a.platform AND w.item_id = a.item_id AND w.aged_at <= a.observed_at)
    SELECT platform, item_id, age, age_hours, aged_at,
      round(before_views + (after_views - before_views) * f)::BIGINT AS views,
      round(before_likes + (after_likes - before_likes) * f)::BIGINT AS likes,
      round(before_comments + (after_comments - before_comments) * f)::BIGINT AS comments,
      round(before_shares + (after_shares - before_shares) * f)::BIGINT AS shares,
      before_at AS observed_before, after_at AS observed_after
    FROM bracketed`,
  // Followers over time: each fresh profile observation, with the change since the one before.
  `CREATE OR REPLACE VIEW account_followers AS
    SELECT platform, handle, observed_at, followers,
      followers - lag(followers) OVER w AS followers_delta,
      epoch(observed_at - lag(observed_at) OVER w) / 3600.0 AS hours_since_previous,
      run_id
    FROM account_metrics WHERE from_cache IS NOT TRUE
    WINDOW w AS (PARTITION BY platform, handle ORDER BY observed_at, request_id)`,
  // Enrichment coverage: for each item and enrichment, the latest call that bought it, or why none
  // did, as the latest run that listed the item tells: its call failed for good (refused), the API
  // offers none (unavailable: TikTok downloads, transcripts of photo posts), the harvest did not ask
  // (not asked), or it asked and the run bought none (budget: the budget or the credits ran out, or
  // the run stopped). Null when that run did not record what it asked (runs before it did).
  `CREATE OR REPLACE VIEW enrichment_coverage AS
    WITH kinds AS (SELECT unnest(['stats', 'comments', 'transcript', 'summary', 'download']) AS enrichment),
    listed AS (
      SELECT platform, item_id, arg_max(run_id, observed_at) AS run_id FROM item_metrics
      WHERE split_part(source_endpoint, '/', 2) NOT IN ('stats') GROUP BY ALL),
    bought AS (
      SELECT split_part(endpoint, '/', 1) AS platform, split_part(endpoint, '/', 2) AS enrichment, params->>'url' AS url,
        max(called_at) AS bought_at, arg_max(run_id, called_at) AS run_id, arg_max(request_id, called_at) AS request_id
      FROM api_calls WHERE split_part(endpoint, '/', 2) IN ('stats', 'comments', 'transcript', 'summary', 'download') GROUP BY ALL),
    refused AS (
      SELECT split_part(endpoint, '/', 1) AS platform, split_part(endpoint, '/', 2) AS enrichment, subject AS url, arg_max(reason, failed_at) AS reason
      FROM failed_calls GROUP BY ALL)
    SELECT i.platform, i.item_id, i.url, k.enrichment, b.bought_at, b.run_id, b.request_id,
      CASE
        WHEN b.bought_at IS NOT NULL THEN NULL
        WHEN f.reason IS NOT NULL THEN 'refused'
        WHEN r.enrichments IS NULL THEN NULL
        WHEN NOT list_contains(r.enrichments, k.enrichment) THEN 'not asked'
        WHEN (k.enrichment = 'download' AND i.platform = 'tiktok') OR (k.enrichment IN ('transcript', 'summary') AND i.kind = 'post') THEN 'unavailable'
        ELSE 'budget'
      END AS why_not,
      f.reason AS refusal
    FROM items i CROSS JOIN kinds k
    LEFT JOIN listed l USING (platform, item_id)
    LEFT JOIN harvest_runs r ON r.run_id = l.run_id
    LEFT JOIN bought b ON b.platform = i.platform AND b.enrichment = k.enrichment AND b.url = i.url
    LEFT JOIN refused f ON f.platform = i.platform AND f.enrichment = k.enrichment AND f.url = i.url`,
  // Search rank over time: an item's best rank for a query in each run that searched it.
  `CREATE OR REPLACE VIEW search_rank_history AS
    SELECT platform, query, kind, item_id, run_id, min(observed_at) AS observed_at, min(rank) AS rank
    FROM search_hits GROUP BY ALL`,
  `CREATE OR REPLACE VIEW top_items_per_account AS
    SELECT i.platform, i.author_handle, i.item_id, i.kind, i.url, m.views, m.likes, m.observed_at,
      rank() OVER (PARTITION BY i.platform, i.author_handle ORDER BY m.views DESC NULLS LAST, m.likes DESC NULLS LAST) AS rank_in_account
    FROM items i JOIN latest_item_metrics m USING (platform, item_id)`,
];

/** Tables, in the order the data dictionary lists them (bookkeeping last). */
export const WAREHOUSE_TABLES = [
  'accounts',
  'account_metrics',
  'items',
  'item_metrics',
  'comments',
  'search_hits',
  'transcripts',
  'transcript_segments',
  'summaries',
  'downloads',
  'media_files',
  'api_calls',
  'harvest_runs',
  'failed_calls',
  'text_repairs',
  'loaded_landings',
  'raw_answers',
  'loaded_segments',
  'schema_drift',
  'call_journal',
] as const;
export type WarehouseTable = (typeof WAREHOUSE_TABLES)[number];
/** The load's own records: what it loaded, the answers (and media files) as they came, how far each segment was read. */
const LOAD_RECORDS = ['media_files', 'loaded_landings', 'raw_answers', 'loaded_segments', 'schema_drift', 'call_journal'] as const;
/** Tables a load stages rows for: every data table. */
export type StagedTable = Exclude<WarehouseTable, (typeof LOAD_RECORDS)[number]>;
export const STAGED_TABLES = WAREHOUSE_TABLES.filter((table): table is StagedTable => !(LOAD_RECORDS as readonly string[]).includes(table));
export const WAREHOUSE_VIEWS = ['latest_item_metrics', 'item_growth', 'item_metrics_at_age', 'account_followers', 'enrichment_coverage', 'search_rank_history', 'top_items_per_account'] as const;
