import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { z } from 'zod';
import { ENDPOINTS, endpointKey, type EndpointKey, type PriceTable } from '../api-catalog/endpoints.js';
import { ConfigError } from './config-error.js';
import { CONFIG_DIR } from '../project-paths.js';

/** Re-exported: ConfigError used to live here, and importers of it from this module keep working. */
export { ConfigError };

export const DEFAULT_PRICES_FILE = join(CONFIG_DIR, 'prices.yaml');

const priceSchema = z.number().int().nonnegative();

/** Parses and checks a price table: every endpoint of the catalog needs a whole, non-negative price. */
export function parsePriceTable(text: string, file: string): PriceTable {
  let raw: unknown;
  try {
    raw = parse(text);
  } catch (error) {
    throw new ConfigError(file, '(document)', `not valid YAML: ${(error as Error).message}`);
  }
  if (typeof raw !== 'object' || raw === null) throw new ConfigError(file, '(document)', 'expected a mapping of platform to endpoint prices');
  const table: Partial<Record<EndpointKey, number>> = {};
  for (const spec of ENDPOINTS) {
    const key = endpointKey(spec);
    const value = (raw as Record<string, Record<string, unknown> | undefined>)[spec.platform]?.[spec.name];
    const checked = priceSchema.safeParse(value);
    if (!checked.success) {
      throw new ConfigError(file, `${spec.platform}.${spec.name}`, `expected a whole number of credits ≥ 0, got ${JSON.stringify(value)}`);
    }
    table[key] = checked.data;
  }
  return table as PriceTable;
}

export function loadPriceTable(file: string = DEFAULT_PRICES_FILE): PriceTable {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(file, '(file)', `cannot read price table: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  return parsePriceTable(text, file);
}
