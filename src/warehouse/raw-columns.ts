/**
 * The columns a load reads each shape of answer with (normalize.ts), and what they read of an
 * answer's data: the schema drift check (schema-drift.ts) compares answers with it.
 */
/**
 * What a landing holds, which decides the column types DuckDB reads it with: a page whose data is
 * a list of items, a page whose data is one resource, a run's status, or a media file.
 */
export type LandingShape = 'list' | 'object' | 'run' | 'media';

const PAGE_COLUMNS = {
  _landing: 'VARCHAR',
  run_id: 'VARCHAR',
  harvest: 'VARCHAR',
  target: 'VARCHAR',
  endpoint: 'VARCHAR',
  params: 'JSON',
  request_id: 'VARCHAR',
  observed_at: 'TIMESTAMPTZ',
  call: 'STRUCT(request_id VARCHAR, units BIGINT, credits BIGINT, cache VARCHAR, job_id VARCHAR)',
  rank_offset: 'BIGINT',
  repairs: 'STRUCT(path VARCHAR, replaced VARCHAR[])[]',
};
const ITEM_METRICS = 'views BIGINT, likes BIGINT, comments BIGINT, shares BIGINT';
const ACCOUNT_METRICS = 'followers BIGINT, following BIGINT, posts BIGINT';

/**
 * The columns each shape is read with. A page's `data` is typed as the union of the fields of
 * the resources of that shape (members a resource lacks read as NULL, unknown members are ignored):
 * every field typed here costs time for each item read.
 */
export const RAW_COLUMNS: Record<LandingShape, Record<string, string>> = {
  list: {
    ...PAGE_COLUMNS,
    data: `STRUCT(id VARCHAR, url VARCHAR, caption VARCHAR, text VARCHAR, likes BIGINT, posted_at TIMESTAMPTZ, author STRUCT(handle VARCHAR), metrics STRUCT(${ITEM_METRICS}))[]`,
  },
  object: {
    ...PAGE_COLUMNS,
    data: `STRUCT(entity_id VARCHAR, url VARCHAR, handle VARCHAR, name VARCHAR, bio VARCHAR, verified BOOLEAN, author STRUCT(handle VARCHAR), posted_at TIMESTAMPTZ,
      metrics STRUCT(${ITEM_METRICS}, ${ACCOUNT_METRICS}), language VARCHAR, source VARCHAR, text VARCHAR, summary VARCHAR, segments STRUCT(start DOUBLE, "end" DOUBLE, text VARCHAR)[],
      media_url VARCHAR, mime_type VARCHAR, expires_at TIMESTAMPTZ, media STRUCT(sha256 VARCHAR, bytes BIGINT))`,
  },
  run: {
    _landing: 'VARCHAR',
    run_id: 'VARCHAR',
    harvest: 'VARCHAR',
    status: 'VARCHAR',
    seq: 'BIGINT',
    started_at: 'TIMESTAMPTZ',
    finished_at: 'TIMESTAMPTZ',
    budget_credits: 'BIGINT',
    credits_spent: 'BIGINT',
    items_landed: 'BIGINT',
    error: 'VARCHAR',
    enrichments: 'VARCHAR[]',
    failed_calls: 'STRUCT(endpoint VARCHAR, subject VARCHAR, reason VARCHAR, request_id VARCHAR, "at" TIMESTAMPTZ)[]',
    answers_quarantined: 'BIGINT',
  },
  media: { _landing: 'VARCHAR', run_id: 'VARCHAR', sha256: 'VARCHAR', mime_type: 'VARCHAR', bytes: 'BIGINT', content_base64: 'VARCHAR' },
};

/**
 * The paths of the members a STRUCT type names, as JSON paths (`$.metrics.views`): what the
 * load reads of an answer's data. A list's elements are read past (`$.segments.start`). Written
 * by hand: a few lines for the types above, where a SQL type parser would be a dependency.
 */
export function structPaths(type: string, prefix = '$'): string[] {
  const body = /^\s*STRUCT\((.*)\)(\[\])?\s*$/s.exec(type)?.[1];
  if (body === undefined) return [];
  const members: string[] = [];
  let depth = 0;
  let start = 0;
  for (let index = 0; index < body.length; index++) {
    const char = body[index];
    if (char === '(') depth++;
    else if (char === ')') depth--;
    else if (char === ',' && depth === 0) {
      members.push(body.slice(start, index));
      start = index + 1;
    }
  }
  members.push(body.slice(start));
  return members.flatMap((member) => {
    const match = /^\s*("[^"]+"|\w+)\s+(.*)$/s.exec(member);
    if (!match) return [];
    const path = `${prefix}.${(match[1] as string).replaceAll('"', '')}`;
    return [path, ...structPaths(match[2] as string, path)];
  });
}

