/**
 * A harvest rig whose worker reaches the emulator through the corrupting proxy
 * (src/emulator/corrupting-proxy.ts), for the tests of answers spoiled on their way back
 * (test/workflows/answer-faults.test.ts, quarantined-answers.test.ts).
 */
import { SocialApiClient } from '../../src/api/client.js';
import { startCorruptingProxy, type Corruption, type ProxiedCall } from '../../src/emulator/corrupting-proxy.js';
import { startHarvestRig } from './harvest-rig.js';
import { harvestFrom, prices, startTestWorker } from './temporal.js';

/** Starts the rig for `keys`, its proxy spoiling the answers `choose` picks; what it starts is closed by `cleanups`, last first. */
export async function startCorruptedRig(keys: { harvest: string; verify: string }, choose: (call: ProxiedCall) => Corruption | undefined, cleanups: (() => Promise<unknown>)[]) {
  const rig = await startHarvestRig(keys);
  const proxy = await startCorruptingProxy({ upstream: new URL(rig.emulator.baseUrl).origin, choose });
  const api = new SocialApiClient({ baseUrl: proxy.baseUrl, apiKey: keys.harvest, prices, retry: { minDelayMs: 5, maxDelayMs: 50, maxElapsedMs: 20_000 } });
  const worker = await startTestWorker(api);
  cleanups.push(
    () => rig.close(),
    () => proxy.close(),
    () => api.close(),
    () => worker.stop(),
  );
  return { ...rig, proxy, worker };
}

/** A harvest named `name` of one TikTok channel's first `maxItems` videos, with their stats. */
export function channelWithStats(name: string, handle: string, maxItems: number) {
  return harvestFrom(`
harvests:
  - name: ${name}
    budget: { credits: 100000 }
    channels:
      - { platform: tiktok, handle: ${handle}, content: videos, max_items: ${maxItems} }
    enrich: { stats: true }
`);
}

/** What the emulator's ledger charged `key`, in all. */
export async function ledgerCredits(emulator: { ledger(key: string): Promise<{ credits: number }[]> }, key: string): Promise<number> {
  return (await emulator.ledger(key)).reduce((sum, row) => sum + row.credits, 0);
}
