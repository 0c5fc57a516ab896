/**
 * Schema drift: the fields that answers carry beyond their resource's schema as the harvester lands
 * it (raw-columns.ts's LANDED_RESOURCES, derived from the API catalog's one table of resources), and
 * what a load does with them: the answer's harvest's schema contract (src/harvest/schema-contract.ts).
 * A load compares answers while it packages them (extract.ts, through DriftSampler here) and records
 * what it found in `schema_drift` in the batch's snapshot: endpoint, field path (`data.sponsor`),
 * first and last seen, in how many of the answers compared, and the contract applied.
 *
 * Under `evolve` (the default) only a sample is compared, the first DRIFT_SAMPLE answers of each run
 * and endpoint (a new field comes with every answer of its endpoint), and the answers keep the field
 * (`raw_answers`) for a rebuild. Under `freeze` and `discard` every answer is compared, since each
 * answer with the field must be set aside or cut: that costs a JSON.parse of each of their answers.
 *
 * Compared in JavaScript (a JSON.parse of each answer compared), not in SQL: walking every sampled
 * answer's tree in DuckDB (json_tree) cost a load about a tenth of a second per batch.
 */
import type { DuckDBConnection } from '@duckdb/node-api';
import { z } from 'zod';
import type { EndpointName } from '../api-catalog/endpoints.js';
import { contractOf, type SchemaContract, type SchemaContracts } from '../harvest/schema-contract.js';
import { sqlString } from './duckdb.js';
import { LANDED_RESOURCES } from './raw-columns.js';

/** Answers of each run and endpoint that a load batch compares under `evolve`. */
export const DRIFT_SAMPLE = 20;

/** The paths of the members of a zod schema (objects within objects, lists read past), as JSON paths. */
function schemaPaths(schema: z.ZodType, prefix = '$'): string[] {
  if (schema instanceof z.ZodOptional || schema instanceof z.ZodNullable) return schemaPaths(schema.unwrap() as z.ZodType, prefix);
  if (schema instanceof z.ZodArray) return schemaPaths(schema.element as z.ZodType, prefix);
  if (!(schema instanceof z.ZodObject)) return [];
  return Object.entries(schema.shape as Record<string, z.ZodType>).flatMap(([name, member]) => [`${prefix}.${name}`, ...schemaPaths(member, `${prefix}.${name}`)]);
}

/** The fields each endpoint's data (its resource, or each item of its list) may carry without drift. */
export const KNOWN_PATHS: Readonly<Record<EndpointName, ReadonlySet<string>>> = Object.fromEntries(
  Object.entries(LANDED_RESOURCES).map(([name, schema]): [string, ReadonlySet<string>] => [name, new Set(schemaPaths(schema))]),
) as Record<EndpointName, ReadonlySet<string>>;

/** A field no column takes, as `schema_drift` records it. */
export interface SchemaDriftRow {
  run_id: string;
  endpoint: string;
  field_path: string;
  first_seen_at: string;
  last_seen_at: string;
  answers: number;
  /** What the load did with it. */
  contract: SchemaContract;
}

/** Records a batch's drift, inside its transaction. */
export async function recordDrift(connection: DuckDBConnection, rows: readonly SchemaDriftRow[]): Promise<void> {
  if (rows.length === 0) return;
  const values = rows.map((row) =>
    `(${sqlString(row.run_id)}, ${sqlString(row.endpoint)}, ${sqlString(row.field_path)}, ${sqlString(row.first_seen_at)}::TIMESTAMPTZ, ${sqlString(row.last_seen_at)}::TIMESTAMPTZ, ${row.answers}, ${sqlString(row.contract)})`);
  await connection.run(`INSERT INTO schema_drift (run_id, endpoint, field_path, first_seen_at, last_seen_at, answers, contract) VALUES ${values.join(', ')}`);
}

/** How far into an answer its run, harvest and endpoint are looked for: the harvester writes them among the first members. */
const HEAD_BYTES = 1024;
/** How much of a field's value a frozen answer's reason shows. */
const SAMPLE_CHARS = 80;

/** Every member path of `value` below `prefix`, lists read past, as DuckDB's json_tree names them. */
function memberPaths(value: unknown, prefix: string, into: Set<string>): void {
  if (Array.isArray(value)) {
    for (const element of value) memberPaths(element, prefix, into);
    return;
  }
  if (value === null || typeof value !== 'object') return;
  for (const [name, member] of Object.entries(value)) {
    const path = `${prefix}.${memberName(name)}`;
    into.add(path);
    memberPaths(member, path, into);
  }
}

const memberName = (name: string) => (/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? name : JSON.stringify(name));

/** `value` without the members whose paths are not `known` (lists read past). */
function withoutUnknown(value: unknown, prefix: string, known: ReadonlySet<string>): unknown {
  if (Array.isArray(value)) return value.map((element) => withoutUnknown(element, prefix, known));
  if (value === null || typeof value !== 'object') return value;
  const kept: Record<string, unknown> = {};
  for (const [name, member] of Object.entries(value)) {
    const path = `${prefix}.${memberName(name)}`;
    if (known.has(path)) kept[name] = withoutUnknown(member, path, known);
  }
  return kept;
}

/** The first value found at `path` (a path memberPaths made) in `value`, lists read past. */
function valueAt(value: unknown, path: string, prefix = '$'): unknown {
  if (Array.isArray(value)) {
    for (const element of value) {
      const found = valueAt(element, path, prefix);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (value === null || typeof value !== 'object') return undefined;
  for (const [name, member] of Object.entries(value)) {
    const here = `${prefix}.${memberName(name)}`;
    if (here === path) return member;
    if (path.startsWith(`${here}.`)) return valueAt(member, path, here);
  }
  return undefined;
}

/** What to package of an answer: its bytes (the answer's own, or without discarded fields), or why it is set aside. */
export type DriftVerdict = { bytes: Buffer } | { rejected: string };

/** Compares a batch's page answers as they are packaged, applies their harvests' contracts, and says what drifted. */
export class DriftSampler {
  private readonly sampled = new Map<string, number>();
  private readonly found = new Map<string, SchemaDriftRow>();

  constructor(private readonly contracts: SchemaContracts = {}) {}

  /** Compares a page answer (its bytes, one JSON object) when its contract or its sample wants it. */
  consider(bytes: Buffer): DriftVerdict {
    const head = bytes.subarray(0, HEAD_BYTES);
    const runId = stringMember(head, 'run_id');
    const endpoint = stringMember(head, 'endpoint');
    if (runId === undefined || endpoint === undefined) return { bytes };
    const known = KNOWN_PATHS[endpoint.slice(endpoint.indexOf('/') + 1) as EndpointName] as ReadonlySet<string> | undefined;
    // An endpoint the catalog does not know: the load sets it aside (normalize.ts), drift or none.
    if (!known) return { bytes };
    const contract = contractOf(this.contracts, stringMember(head, 'harvest'), endpoint);
    if (contract === 'evolve') {
      const sample = `${runId}\n${endpoint}`;
      const taken = this.sampled.get(sample) ?? 0;
      if (taken >= DRIFT_SAMPLE) return { bytes };
      this.sampled.set(sample, taken + 1);
    }
    let answer: { data?: unknown; observed_at?: unknown };
    try {
      answer = JSON.parse(bytes.toString('utf8')) as typeof answer;
    } catch {
      return { bytes }; // Not JSON: the load sets it aside with its reason (extract, normalize.ts).
    }
    const paths = new Set<string>();
    memberPaths(answer.data, '$', paths);
    const unknown = [...paths].filter((path) => !known.has(path));
    if (unknown.length === 0) return { bytes };
    const seen = typeof answer.observed_at === 'string' ? answer.observed_at : new Date().toISOString();
    for (const path of unknown) this.record({ run_id: runId, endpoint, field_path: `data${path.slice(1)}`, first_seen_at: seen, last_seen_at: seen, answers: 1, contract });
    if (contract === 'freeze') {
      const first = unknown[0] as string;
      const value = JSON.stringify(valueAt(answer.data, first)) ?? 'undefined';
      const shown = value.length > SAMPLE_CHARS ? `${value.slice(0, SAMPLE_CHARS)}…` : value;
      const fields = unknown.map((path) => `data${path.slice(1)}`).join(', ');
      return { rejected: `schema contract freeze: this ${endpoint} answer carries ${fields}, which the resource's schema lacks (data${first.slice(1)} = ${shown})` };
    }
    if (contract === 'discard') return { bytes: Buffer.from(JSON.stringify({ ...answer, data: withoutUnknown(answer.data, '$', known) })) };
    return { bytes };
  }

  rows(): SchemaDriftRow[] {
    return [...this.found.values()];
  }

  private record(row: SchemaDriftRow): void {
    const key = `${row.run_id}\n${row.endpoint}\n${row.field_path}\n${row.contract}`;
    const found = this.found.get(key);
    if (!found) {
      this.found.set(key, row);
      return;
    }
    found.answers++;
    if (Date.parse(row.first_seen_at) < Date.parse(found.first_seen_at)) found.first_seen_at = row.first_seen_at;
    if (Date.parse(row.last_seen_at) > Date.parse(found.last_seen_at)) found.last_seen_at = row.last_seen_at;
  }
}

/**
 * A string member of an answer, read from its first bytes without parsing it (the sample is
 * chosen before anything is parsed). Undefined for a value with an escape in it: such a run id,
 * harvest or endpoint is none the harvester writes.
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
