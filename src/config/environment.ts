import { resolve } from 'node:path';

/** Settings taken from the environment, with errors that name the variable and what is wrong. */

export class EnvironmentError extends Error {
  override readonly name = 'EnvironmentError';
}

export interface ApiSettings {
  baseUrl: string;
  apiKey: string;
}

export function apiSettingsFromEnv(env: NodeJS.ProcessEnv = process.env): ApiSettings {
  const baseUrl = env.SOCIAL_API_BASE_URL;
  const apiKey = env.SOCIAL_API_KEY;
  if (!baseUrl) throw new EnvironmentError('SOCIAL_API_BASE_URL is not set: give the API base URL, e.g. http://127.0.0.1:8787 for `harvester emulator` (with or without /v1)');
  try {
    new URL(baseUrl);
  } catch {
    throw new EnvironmentError(`SOCIAL_API_BASE_URL is not a URL: ${JSON.stringify(baseUrl)}`);
  }
  if (!apiKey) throw new EnvironmentError('SOCIAL_API_KEY is not set: give the API key (it starts with sk_live_)');
  if (!apiKey.startsWith('sk_live_')) throw new EnvironmentError('SOCIAL_API_KEY does not start with sk_live_ (value not shown)');
  return { baseUrl, apiKey };
}

/**
 * Where harvests keep their data: HARVESTER_DATA_DIR, else HARVESTER_STORAGE when it is a
 * directory, else ./data. With shared storage (HARVESTER_STORAGE=s3://…) it is the process's scratch.
 */
export function dataDirFromEnv(env: NodeJS.ProcessEnv = process.env): string {
  const storage = env.HARVESTER_STORAGE;
  const storageDir = storage !== undefined && storage !== '' && !storage.startsWith('s3://') ? resolve(storage) : undefined;
  if (storageDir && env.HARVESTER_DATA_DIR && resolve(env.HARVESTER_DATA_DIR) !== storageDir) {
    throw new EnvironmentError(`HARVESTER_STORAGE (${storageDir}) and HARVESTER_DATA_DIR (${resolve(env.HARVESTER_DATA_DIR)}) name two directories: set one of them`);
  }
  return resolve(env.HARVESTER_DATA_DIR ?? storageDir ?? 'data');
}
