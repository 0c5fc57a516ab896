/**
 * A harvest's schema contract: what a load does with a field an answer carries beyond its
 * resource's schema (src/api-catalog/resources.ts), as the harvest declares it (`schema_contract`
 * in the config). Pure: the config, the workflow and the warehouse all read it from here.
 */
import type { EndpointName } from '../api-catalog/endpoints.js';

/**
 * - `evolve` (the default): the field is recorded in `schema_drift` and kept in the answer (raw_answers).
 * - `freeze`: the answer is not loaded: it is set aside in quarantine/ with a reason naming the
 *   resource, the field and a sample of it, and the field is recorded in `schema_drift`.
 * - `discard`: the field is dropped from the answer before it is loaded (raw_answers too), and
 *   recorded in `schema_drift` as discarded.
 */
export const SCHEMA_CONTRACTS = ['evolve', 'freeze', 'discard'] as const;
export type SchemaContract = (typeof SCHEMA_CONTRACTS)[number];

/** A harvest's contract: one for all its resources, and a resource's own where it names one. */
export interface HarvestSchemaContract {
  default: SchemaContract;
  resources?: Partial<Record<EndpointName, SchemaContract>>;
}

/** The contracts a load applies, by harvest name; a harvest it does not name is loaded under `evolve`. */
export type SchemaContracts = Readonly<Record<string, HarvestSchemaContract>>;

export const DEFAULT_SCHEMA_CONTRACT: SchemaContract = 'evolve';

/** The contract an answer of `endpoint` (`tiktok/stats`, or the bare `stats`) of `harvest` is loaded under. */
export function contractOf(contracts: SchemaContracts, harvest: string | undefined, endpoint: string): SchemaContract {
  const contract = harvest !== undefined && Object.hasOwn(contracts, harvest) ? contracts[harvest] : undefined;
  if (!contract) return DEFAULT_SCHEMA_CONTRACT;
  const name = (endpoint.includes('/') ? endpoint.slice(endpoint.indexOf('/') + 1) : endpoint) as EndpointName;
  return contract.resources?.[name] ?? contract.default;
}
