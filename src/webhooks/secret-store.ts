import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * Where `harvester webhooks register` keeps the signing secrets the API shows only once, so the
 * receiver can verify deliveries: `<data dir>/webhooks/secrets.json`, readable by its owner only.
 */
export interface StoredSecret {
  webhook_id: string;
  url: string;
  secret: string;
}

export function secretStorePath(dataDir: string): string {
  return join(dataDir, 'webhooks', 'secrets.json');
}

export function readSecrets(file: string): StoredSecret[] {
  if (!existsSync(file)) return [];
  const parsed: unknown = JSON.parse(readFileSync(file, 'utf8'));
  if (!Array.isArray(parsed)) throw new Error(`${file}: expected a JSON array of {webhook_id, url, secret}`);
  return parsed as StoredSecret[];
}

export function writeSecrets(file: string, secrets: StoredSecret[]): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(secrets, null, 2)}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
}
