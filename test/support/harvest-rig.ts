/**
 * Test support for harvests: an emulator with a harvest key and a verification key (whose charges
 * are not the harvest's), their clients, a Temporal client, and the emulator's catalog.
 */
import type { Client } from '@temporalio/client';
import type { SocialApiClient } from '../../src/api/client.js';
import type { EmulatorOptions } from '../../src/emulator/server.js';
import { clientFor } from './client.js';
import { startTestEmulator, type TestEmulator } from './emulator.js';
import { temporalClient } from './temporal.js';

export type ListEndpointOfTests = 'channel-videos' | 'channel-reels' | 'search' | 'comments';

export interface HarvestRig {
  emulator: TestEmulator;
  temporal: Client;
  /** The client of the harvest's key. */
  api: SocialApiClient;
  /** The client of the verification key. */
  verify: SocialApiClient;
  catalog: Awaited<ReturnType<TestEmulator['catalog']>>;
  /** The first `n` ids of a listing, read with the verification key. */
  firstIds(platform: 'tiktok' | 'instagram', endpoint: ListEndpointOfTests, params: Record<string, string>, n: number): Promise<string[]>;
  close(): Promise<void>;
}

export async function startHarvestRig(keys: { harvest: string; verify: string }, options: EmulatorOptions = {}): Promise<HarvestRig> {
  const emulator = await startTestEmulator({ apiKeys: [keys.harvest, keys.verify], ...options });
  const temporal = await temporalClient();
  const api = clientFor(emulator, { apiKey: keys.harvest });
  const verify = clientFor(emulator, { apiKey: keys.verify });
  return {
    emulator,
    temporal,
    api,
    verify,
    catalog: await emulator.catalog(),
    async firstIds(platform, endpoint, params, n) {
      const ids: string[] = [];
      for await (const page of verify.pages(platform, endpoint, params, { maxItems: n })) ids.push(...page.items.map((item) => item.id));
      return ids;
    },
    async close() {
      await api.close();
      await verify.close();
      await temporal.connection.close();
      await emulator.close();
    },
  };
}
