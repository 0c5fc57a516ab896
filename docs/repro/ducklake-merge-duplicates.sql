-- DuckLake 1.5.5 (DuckDB 1.5.5): MERGE INTO with a source query built from a CTE and UNION ALL
-- leaves rows matched at positions 2,048 and above of a data file visible beside their new
-- versions. Run with the DuckDB CLI 1.5.5 from an empty folder, after loading the ducklake and
-- sqlite extensions (social-harvester's test replaces the LOAD lines with its extensions' paths):
--   duckdb -c ".read ducklake-merge-duplicates.sql"
-- Expected: 2600 rows for 2600 keys. DuckDB 1.5.5 with ducklake: 2902 rows for 2600 keys.
-- The same MERGE from a table holding the CTE's rows (CREATE TEMP TABLE s AS <the CTE>; ... USING s)
-- gives 2600 rows, as does the same MERGE into a plain DuckDB table.
LOAD ducklake;
LOAD sqlite_scanner;
ATTACH 'ducklake:sqlite:catalog.sqlite' AS lake (DATA_PATH 'data/');
USE lake;
CREATE TABLE items (platform VARCHAR NOT NULL, item_id VARCHAR NOT NULL, caption VARCHAR,
  first_seen_at TIMESTAMPTZ NOT NULL, last_seen_at TIMESTAMPTZ NOT NULL);
-- One data file of 2,350 rows.
INSERT INTO items SELECT 'tiktok', 'v' || i, 'old ' || i, TIMESTAMPTZ '2026-01-01 00:00:00+00', TIMESTAMPTZ '2026-01-01 00:00:00+00' FROM range(2350) r(i);
-- A batch: 1,958 of those keys (positions 392 to 2,349) and 250 new ones; 3 keys twice.
CREATE TEMP TABLE stage_items AS
  SELECT 'tiktok' AS platform, 'v' || i AS item_id, 'new ' || i AS caption, TIMESTAMPTZ '2026-01-02 00:00:00+00' AS seen_at FROM range(392, 2600) r(i)
  UNION ALL SELECT 'tiktok', 'v' || i, 'newer ' || i, TIMESTAMPTZ '2026-01-02 01:00:00+00' FROM range(2347, 2350) r(i);
MERGE INTO items USING (
  WITH repeated AS (SELECT platform, item_id FROM stage_items GROUP BY platform, item_id HAVING count(*) > 1)
  SELECT platform, item_id, caption, seen_at AS first_seen_at, seen_at AS last_seen_at FROM stage_items ANTI JOIN repeated USING (platform, item_id)
  UNION ALL
  SELECT platform, item_id, arg_max(caption, seen_at) AS caption, min(seen_at) AS first_seen_at, max(seen_at) AS last_seen_at
  FROM stage_items SEMI JOIN repeated USING (platform, item_id) GROUP BY platform, item_id
) AS s ON items.platform = s.platform AND items.item_id = s.item_id
WHEN MATCHED THEN UPDATE SET caption = s.caption, first_seen_at = least(items.first_seen_at, s.first_seen_at), last_seen_at = greatest(items.last_seen_at, s.last_seen_at)
WHEN NOT MATCHED THEN INSERT BY NAME;
SELECT count(*) AS rows, count(DISTINCT (platform, item_id)) AS keys FROM items;
