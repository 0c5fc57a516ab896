import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { writeDurableFile } from './durable-file.js';

/**
 * The `credits.low` state, kept in the data directory so every worker and every `harvester run`
 * sees it: set when the API says the balance fell below 10% of the plan, cleared when the plan
 * changes (credits are back). While it is set, no new run starts.
 */
export interface CreditsLow {
  since: string;
  remaining_credits?: number;
  plan?: string;
}

function flagFile(dataDir: string): string {
  return join(dataDir, 'state', 'credits-low.json');
}

export function markCreditsLow(dataDir: string, details: Omit<CreditsLow, 'since'>): void {
  writeDurableFile(flagFile(dataDir), JSON.stringify({ since: new Date().toISOString(), ...details }), { what: 'credits-low flag' });
}

export function clearCreditsLow(dataDir: string): void {
  rmSync(flagFile(dataDir), { force: true });
}

export function creditsLow(dataDir: string): CreditsLow | undefined {
  return existsSync(flagFile(dataDir)) ? (JSON.parse(readFileSync(flagFile(dataDir), 'utf8')) as CreditsLow) : undefined;
}
