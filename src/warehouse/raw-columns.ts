/**
 * The columns a load reads each shape of answer with (normalize.ts). What it reads of an answer's
 * data is derived from the API catalog's one table of resources (src/api-catalog/resources.ts,
 * RESOURCE_SCHEMAS) and what the harvester adds as it lands: a resource added there is read here,
 * and known to the schema drift check (schema-drift.ts), with no list to copy it into.
 */
import { z } from 'zod';
import { ENDPOINTS, type EndpointName } from '../api-catalog/endpoints.js';
import { isTimestampSchema, RESOURCE_SCHEMAS } from '../api-catalog/resources.js';

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
/**
 * What the harvester itself adds to an answer's data as it lands it: a download's media file, which
 * it stored (src/store/media-store.ts).
 */
const LANDED_ADDITIONS: Partial<Record<EndpointName, z.ZodObject>> = {
  download: z.object({ media: z.object({ sha256: z.string(), bytes: z.number().int(), mime_type: z.string() }) }),
};

/** Each endpoint's resource as it is landed: the API's (RESOURCE_SCHEMAS) with what the harvester adds. */
export const LANDED_RESOURCES = Object.fromEntries(
  Object.entries(RESOURCE_SCHEMAS).map(([name, schema]) => {
    const added = LANDED_ADDITIONS[name as EndpointName];
    return [name, added ? schema.extend(added.shape) : schema];
  }),
) as Readonly<Record<EndpointName, z.ZodObject>>;

/** A DuckDB type as a tree, so the resources of one shape can be read with one type: the union of their members. */
type ColumnType = { struct: Map<string, ColumnType> } | { list: ColumnType } | { scalar: string };

/**
 * The DuckDB type a JSON value of `schema` is read as; throws for a kind of member the load cannot
 * type (a resource given one fails every load at once, not one answer). Written by hand: a few lines
 * for the zod kinds the resources use, where zod's JSON Schema export would still need a JSON Schema
 * to DuckDB step, and would lose which strings are timestamps.
 */
function columnTypeOf(schema: z.ZodType, path: string): ColumnType {
  if (schema instanceof z.ZodOptional || schema instanceof z.ZodNullable) return columnTypeOf(schema.unwrap() as z.ZodType, path);
  if (schema instanceof z.ZodObject) {
    return { struct: new Map(Object.entries(schema.shape as Record<string, z.ZodType>).map(([name, member]) => [name, columnTypeOf(member, `${path}.${name}`)])) };
  }
  if (schema instanceof z.ZodArray) return { list: columnTypeOf(schema.element as z.ZodType, path) };
  if (schema instanceof z.ZodString) return { scalar: isTimestampSchema(schema) ? 'TIMESTAMPTZ' : 'VARCHAR' };
  if (schema instanceof z.ZodEnum) return { scalar: 'VARCHAR' };
  if (schema instanceof z.ZodNumber) return { scalar: schema.format === 'safeint' ? 'BIGINT' : 'DOUBLE' };
  if (schema instanceof z.ZodBoolean) return { scalar: 'BOOLEAN' };
  throw new Error(`${path}: no DuckDB type for a ${schema.constructor.name} member of a resource (src/warehouse/raw-columns.ts)`);
}

/** Two resources' types of one member, as one: structs take both's members; anything else must agree. */
function unionOf(a: ColumnType, b: ColumnType, path: string): ColumnType {
  if ('struct' in a && 'struct' in b) {
    const members = new Map(a.struct);
    for (const [name, type] of b.struct) members.set(name, members.has(name) ? unionOf(members.get(name) as ColumnType, type, `${path}.${name}`) : type);
    return { struct: members };
  }
  if ('list' in a && 'list' in b) return { list: unionOf(a.list, b.list, path) };
  if ('scalar' in a && 'scalar' in b && a.scalar === b.scalar) return a;
  throw new Error(`${path}: resources of one shape give this member two types (${sqlTypeOf(a)} and ${sqlTypeOf(b)}), which one column cannot read`);
}

function sqlTypeOf(type: ColumnType): string {
  if ('scalar' in type) return type.scalar;
  if ('list' in type) return `${sqlTypeOf(type.list)}[]`;
  return `STRUCT(${[...type.struct].map(([name, member]) => `"${name}" ${sqlTypeOf(member)}`).join(', ')})`;
}

/** The type of the `data` of a page of `shape`: the union of the landed resources of the endpoints of that shape. */
function dataTypeOf(shape: 'list' | 'object'): string {
  const names = [...new Set(ENDPOINTS.filter((spec) => spec.shape === shape).map((spec) => spec.name))];
  const item = names.map((name) => columnTypeOf(LANDED_RESOURCES[name], name)).reduce((a, b) => unionOf(a, b, shape));
  return sqlTypeOf(shape === 'list' ? { list: item } : item);
}

/**
 * The columns each shape is read with. A page's `data` is typed as the union of the fields of
 * the resources of that shape (members a resource lacks read as NULL, unknown members are ignored).
 */
export const RAW_COLUMNS: Record<LandingShape, Record<string, string>> = {
  list: { ...PAGE_COLUMNS, data: dataTypeOf('list') },
  object: { ...PAGE_COLUMNS, data: dataTypeOf('object') },
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

