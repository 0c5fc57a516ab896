/**
 * Schema drift: the fields that answers carry beyond the API's published schema (src/api-catalog/
 * resources.ts) and beyond what the load reads (raw-columns.ts), which no column therefore takes.
 * A load compares a sample of its batch's answers (the first DRIFT_SAMPLE of each run and endpoint:
 * a new field comes with every answer of its endpoint) while it packages them (load-package.ts),
 * and records what it found in `schema_drift` in the batch's snapshot: endpoint, field path
 * (`data.sponsor`), first and last seen, and in how many of the answers compared. The answers keep
 * the fields (`raw_answers`) for a rebuild.
 *
 * Compared in JavaScript on the few answers sampled (a JSON.parse of each), not in SQL: walking
 * every sampled answer's tree in DuckDB (json_tree) cost a load about a tenth of a second per batch.
 */
import type { DuckDBConnection } from '@duckdb/node-api';
import { z } from 'zod';
import { channelItemSchema, channelProfileSchema, commentSchema, downloadSchema, searchResultSchema, statsSchema, summarySchema, transcriptSchema } from '../api-catalog/resources.js';
import { sqlString } from './duckdb.js';
import { RAW_COLUMNS, structPaths } from './raw-columns.js';

/** Answers of each run and endpoint whose fields a load batch compares with what it reads. */
export const DRIFT_SAMPLE = 20;

/** The paths of the members of a zod schema (objects within objects, lists read past), as JSON paths. */
function schemaPaths(schema: z.ZodType, prefix = '$'): string[] {
  if (schema instanceof z.ZodOptional || schema instanceof z.ZodNullable) return schemaPaths(schema.unwrap() as z.ZodType, prefix);
  if (schema instanceof z.ZodArray) return schemaPaths(schema.element as z.ZodType, prefix);
  if (!(schema instanceof z.ZodObject)) return [];
  return Object.entries(schema.shape as Record<string, z.ZodType>).flatMap(([name, member]) => [`${prefix}.${name}`, ...schemaPaths(member, `${prefix}.${name}`)]);
}

/** The fields an answer's data may carry without drift, by the shape of the data: a list of items, or one resource. */
const KNOWN_PATHS: Record<'list' | 'object', ReadonlySet<string>> = {
  list: new Set([...[commentSchema, channelItemSchema, searchResultSchema].flatMap((schema) => schemaPaths(schema)), ...structPaths(RAW_COLUMNS.list.data as string)]),
  object: new Set([
    ...[transcriptSchema, summarySchema, statsSchema, channelProfileSchema, downloadSchema].flatMap((schema) => schemaPaths(schema)),
    ...structPaths(RAW_COLUMNS.object.data as string),
    // What the harvester itself adds to a download's answer: the media file it stored (src/store/media-store.ts).
    ...['$.media', '$.media.sha256', '$.media.bytes', '$.media.mime_type'],
  ]),
};

/** A field no column takes, as `schema_drift` records it. */
export interface SchemaDriftRow {
  run_id: string;
  endpoint: string;
  field_path: string;
  first_seen_at: string;
  last_seen_at: string;
  answers: number;
}

/** How far into an answer its run and endpoint are looked for: the harvester writes them among the first members. */
const HEAD_BYTES = 1024;

/** Every member path of `value` below `prefix`, lists read past, as DuckDB's json_tree names them. */
function memberPaths(value: unknown, prefix: string, into: Set<string>): void {
  if (Array.isArray(value)) {
    for (const element of value) memberPaths(element, prefix, into);
    return;
  }
  if (value === null || typeof value !== 'object') return;
  for (const [name, member] of Object.entries(value)) {
    const path = `${prefix}.${/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? name : JSON.stringify(name)}`;
    into.add(path);
    memberPaths(member, path, into);
  }
}

/** Samples a batch's page answers as they are packaged, and says what drifted. */
export class DriftSampler {
  private readonly sampled = new Map<string, number>();
  private readonly found = new Map<string, SchemaDriftRow>();

  /** Compares a page answer (its bytes, one JSON object) if its run and endpoint still want a sample. */
  consider(bytes: Buffer): void {
    const head = bytes.subarray(0, HEAD_BYTES);
    const runId = stringMember(head, 'run_id');
    const endpoint = stringMember(head, 'endpoint');
    if (runId === undefined || endpoint === undefined) return;
    const sample = `${runId}\n${endpoint}`;
    const taken = this.sampled.get(sample) ?? 0;
    if (taken >= DRIFT_SAMPLE) return;
    this.sampled.set(sample, taken + 1);
    let answer: { data?: unknown; observed_at?: unknown };
    try {
      answer = JSON.parse(bytes.toString('utf8')) as typeof answer;
    } catch {
      return; // Not JSON: the load sets it aside with its reason (load-package.ts, normalize.ts).
    }
    const known = KNOWN_PATHS[Array.isArray(answer.data) ? 'list' : 'object'];
    const paths = new Set<string>();
    memberPaths(answer.data, '$', paths);
    const seen = typeof answer.observed_at === 'string' ? answer.observed_at : new Date().toISOString();
    for (const path of paths) {
      if (known.has(path)) continue;
      const field = `data${path.slice(1)}`;
      const key = `${sample}\n${field}`;
      const row = this.found.get(key);
      if (!row) this.found.set(key, { run_id: runId, endpoint, field_path: field, first_seen_at: seen, last_seen_at: seen, answers: 1 });
      else {
        row.answers++;
        if (Date.parse(seen) < Date.parse(row.first_seen_at)) row.first_seen_at = seen;
        if (Date.parse(seen) > Date.parse(row.last_seen_at)) row.last_seen_at = seen;
      }
    }
  }

  rows(): SchemaDriftRow[] {
    return [...this.found.values()];
  }
}

/**
 * A string member of an answer, read from its first bytes without parsing it (the sample is
 * chosen before anything is parsed). Undefined for a value with an escape in it: such a run id or
 * endpoint is none the harvester writes.
 */
function stringMember(head: Buffer, name: string): string | undefined {
  const member = Buffer.from(`"${name}":"`);
  const at = head.indexOf(member);
  if (at < 0) return undefined;
  const start = at + member.length;
  const end = head.indexOf(0x22, start);
  if (end < 0) return undefined;
  const escape = head.indexOf(0x5c, start);
  if (escape !== -1 && escape < end) return undefined;
  return head.toString('utf8', start, end);
}

/** Records a batch's drift, inside its transaction. */
export async function recordDrift(connection: DuckDBConnection, rows: readonly SchemaDriftRow[]): Promise<void> {
  if (rows.length === 0) return;
  const values = rows.map((row) =>
    `(${sqlString(row.run_id)}, ${sqlString(row.endpoint)}, ${sqlString(row.field_path)}, ${sqlString(row.first_seen_at)}::TIMESTAMPTZ, ${sqlString(row.last_seen_at)}::TIMESTAMPTZ, ${row.answers})`);
  await connection.run(`INSERT INTO schema_drift VALUES ${values.join(', ')}`);
}
