import { existsSync, readFileSync } from 'node:fs';
import { writeDurableFile } from './durable-file.js';

/**
 * Where `harvester webhooks register` keeps the signing secrets the API shows only once, so the
 * receiver can verify deliveries: `<data dir>/webhooks/secrets.json`, readable by its owner only.
 */
export interface StoredSecret {
  webhook_id: string;
  url: string;
  secret: string;
}

export function readSecrets(file: string): StoredSecret[] {
  if (!existsSync(file)) return [];
  const parsed: unknown = JSON.parse(readFileSync(file, 'utf8'));
  if (!Array.isArray(parsed)) throw new Error(`${file}: expected a JSON array of {webhook_id, url, secret}`);
  return parsed as StoredSecret[];
}

/**
 * Replaces the store whole (writeDurableFile): a failed write leaves the secrets as they were, never
 * a cut-short file. The new file is created readable by its owner only, whatever the old one was.
 */
export function writeSecrets(file: string, secrets: StoredSecret[]): void {
  writeDurableFile(file, `${JSON.stringify(secrets, null, 2)}\n`, { what: 'webhook secret store', mode: 0o600 });
}
