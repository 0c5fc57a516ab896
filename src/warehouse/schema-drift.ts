/**
 * Schema drift: the fields that answers carry beyond the API's published schema (src/api-catalog/
 * resources.ts) and beyond what the load reads (raw-columns.ts), which no column therefore takes.
 * A load compares a sample of its batch's answers (the first DRIFT_SAMPLE of each run and endpoint:
 * a new field comes with every answer of its endpoint) while it packages them (extract.ts's
 * DriftSampler, against KNOWN_PATHS here), and records what it found in `schema_drift` in the batch's snapshot: endpoint, field path
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
export const KNOWN_PATHS: Record<'list' | 'object', ReadonlySet<string>> = {
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

/** Records a batch's drift, inside its transaction. */
export async function recordDrift(connection: DuckDBConnection, rows: readonly SchemaDriftRow[]): Promise<void> {
  if (rows.length === 0) return;
  const values = rows.map((row) =>
    `(${sqlString(row.run_id)}, ${sqlString(row.endpoint)}, ${sqlString(row.field_path)}, ${sqlString(row.first_seen_at)}::TIMESTAMPTZ, ${sqlString(row.last_seen_at)}::TIMESTAMPTZ, ${row.answers})`);
  await connection.run(`INSERT INTO schema_drift VALUES ${values.join(', ')}`);
}
