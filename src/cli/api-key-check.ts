/**
 * Whether the API takes the key, asked before a worker polls, so that a refused key ends the
 * command in one line before any run starts. Asked with a free call (GET /v1/webhooks, no credits)
 * made while Temporal connects; and once the API accepted this key at this base URL, not again for
 * a day: the answer costs a round trip to the API (at 250 ms a call, a quarter of `harvester run`'s
 * start), and a key revoked within the day still stops the run at its first call, which fails
 * without a charge, saying the key was refused.
 */
import { readFileSync } from 'node:fs';
import { AuthenticationError } from '../api/errors.js';
import { apiIdentity } from '../api/identity.js';
import { apiSettingsFromEnv } from '../config/environment.js';
import type { Logger } from '../logger.js';
import { writeDurableFile } from '../store/durable-file.js';
import { apiKeyAcceptedFile } from '../store/layout.js';
import { clientFromEnv } from './context.js';

/** How long the API's acceptance of a key is taken as still holding. */
export const KEY_ACCEPTED_FOR_MS = 24 * 3_600_000;

interface AcceptedKey {
  baseUrl: string;
  /** The key's fingerprint (a hash), never the key. */
  keyFingerprint: string;
  acceptedAt: string;
}

/** The record of the key's acceptance, when it names this API and key and is less than a day old. */
function recentlyAccepted(file: string, identity: { baseUrl: string; keyFingerprint: string }, now: number): boolean {
  try {
    const record = JSON.parse(readFileSync(file, 'utf8')) as Partial<AcceptedKey>;
    const age = now - Date.parse(String(record.acceptedAt));
    return record.baseUrl === identity.baseUrl && record.keyFingerprint === identity.keyFingerprint && age >= 0 && age < KEY_ACCEPTED_FOR_MS;
  } catch {
    return false; // none, or unreadable: asked again
  }
}

/**
 * Throws an AuthenticationError naming the API (never the key) when the API refuses the key. Any
 * other failure is left to the run, whose calls retry what is transient.
 */
export async function assertApiKeyAccepted(logger: Logger, dataDir: string): Promise<void> {
  const settings = apiSettingsFromEnv();
  const identity = apiIdentity(settings);
  const file = apiKeyAcceptedFile(dataDir);
  if (recentlyAccepted(file, identity, Date.now())) return;
  const probe = clientFromEnv(logger, { maxAttempts: 1 });
  try {
    await probe.listWebhooks();
  } catch (error) {
    if (error instanceof AuthenticationError) {
      throw new AuthenticationError(`the API at ${settings.baseUrl} refused SOCIAL_API_KEY: ${error.message}`, { status: error.status, code: error.code, requestId: error.requestId });
    }
    logger.debug({ err: error }, 'API key check inconclusive; the run goes on');
    return;
  } finally {
    await probe.close();
  }
  // Replaced whole, never synced: a record lost to a crash only means one more check. (Through
  // writeDurableFile for its temporary's name, which the worker's start clears if a kill left it.)
  const record: AcceptedKey = { ...identity, acceptedAt: new Date().toISOString() };
  writeDurableFile(file, JSON.stringify(record), { what: 'API key acceptance record', durable: false });
}
