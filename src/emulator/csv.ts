import { z } from 'zod';
import { listedItemKind, type EndpointSpec } from '../api-catalog/endpoints.js';
import { RESOURCE_SCHEMAS } from '../api-catalog/resources.js';
import { csvLine } from '../text/csv.js';

/**
 * CSV for list endpoints: a header row, then one row per item, nested fields flattened with `_`
 * (author.handle → author_handle).
 */
function flatten(value: Record<string, unknown>, prefix = '', into: Record<string, unknown> = {}): Record<string, unknown> {
  for (const [key, field] of Object.entries(value)) {
    const name = prefix ? `${prefix}_${key}` : key;
    if (field !== null && typeof field === 'object' && !Array.isArray(field)) flatten(field as Record<string, unknown>, name, into);
    else into[name] = field;
  }
  return into;
}

export function toCsv(items: readonly Record<string, unknown>[], columns: readonly string[]): string {
  const rows = items.map((item) => flatten(item));
  const lines = [csvLine(columns), ...rows.map((row) => csvLine(columns.map((column) => row[column])))];
  return `${lines.join('\r\n')}\r\n`;
}

/**
 * The CSV columns of a list endpoint: its item's members in the one table of resources
 * (src/api-catalog/resources.ts), flattened as the rows are, so even an empty page has its header
 * row. A photo post has no views (its schema's `metrics.views` is optional), so a list of posts
 * leaves that column out.
 */
export function csvColumns(spec: EndpointSpec): string[] {
  const columns = schemaColumns(RESOURCE_SCHEMAS[spec.name]);
  return listedItemKind(spec) === 'post' ? columns.filter((column) => column !== 'metrics_views') : columns;
}

function schemaColumns(schema: z.ZodType, prefix = ''): string[] {
  if (schema instanceof z.ZodOptional || schema instanceof z.ZodNullable) return schemaColumns(schema.unwrap() as z.ZodType, prefix);
  if (!(schema instanceof z.ZodObject)) return [prefix];
  return Object.entries(schema.shape as Record<string, z.ZodType>).flatMap(([name, member]) => schemaColumns(member, prefix ? `${prefix}_${name}` : name));
}
