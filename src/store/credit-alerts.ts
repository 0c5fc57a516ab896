import { existsSync, readFileSync, rmSync } from 'node:fs';
import { writeDurableFile } from './durable-file.js';
import { creditsLowFile } from './layout.js';

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

export function markCreditsLow(dataDir: string, details: Omit<CreditsLow, 'since'>): void {
  writeDurableFile(creditsLowFile(dataDir), JSON.stringify({ since: new Date().toISOString(), ...details }), { what: 'credits-low flag' });
}

export function clearCreditsLow(dataDir: string): void {
  rmSync(creditsLowFile(dataDir), { force: true });
}

export function creditsLow(dataDir: string): CreditsLow | undefined {
  return existsSync(creditsLowFile(dataDir)) ? (JSON.parse(readFileSync(creditsLowFile(dataDir), 'utf8')) as CreditsLow) : undefined;
}
