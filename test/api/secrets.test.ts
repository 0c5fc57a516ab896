import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SocialApiClient } from '../../src/api/client.js';
import { startWebhookReceiver } from '../../src/webhooks/receiver.js';
import { startTestEmulator, waitFor } from '../support/emulator.js';
import { clientFor, memoryLogger, prices } from '../support/client.js';
import { DEV_CERT_FILE, DEV_KEY_FILE, devCa } from '../support/https-receiver.js';

describe('secrets never reach logs or errors', () => {
  it('API key, webhook secrets and signatures are absent from every log line and error message', async () => {
    const apiKey = 'sk_live_very_secret_key_123456';
    const emulator = await startTestEmulator({ apiKeys: [apiKey], faultRate: 0.3, webhookCa: devCa(), jobStepMs: 10 });
    const { logger, lines } = memoryLogger();
    const client = clientFor(emulator, { logger, retry: { maxAttempts: 8, minDelayMs: 1, maxDelayMs: 5 } });
    const secrets: string[] = [];
    const signatures: string[] = [];
    const receiver = await startWebhookReceiver({
      cert: readFileSync(DEV_CERT_FILE),
      key: readFileSync(DEV_KEY_FILE),
      secrets: () => secrets,
      journalFile: join(mkdtempSync(join(tmpdir(), 'secrets-')), 'journal.jsonl'),
      logger,
      onEvent: () => undefined,
    });
    const messages: string[] = [];
    try {
      const created = await client.createWebhook(receiver.url, ['job.completed']);
      secrets.push(created.secret);
      const handle = (await emulator.catalog()).tiktok.handles[0]!;
      for await (const page of client.pages('tiktok', 'channel-videos', { handle }, { maxItems: 200, pageSize: 20 })) void page;
      const { job } = await client.startJob('tiktok', 'channel-videos', { handle, limit: 60 });
      await client.waitForJob(job.job_id, { pollMinMs: 10 });
      // Errors of every kind, from a key that is wrong in an instructive way.
      const wrong = new SocialApiClient({ baseUrl: emulator.baseUrl, apiKey: `${apiKey}_revoked`, prices, logger, retry: { maxAttempts: 1 } });
      await wrong.get('tiktok', 'channel-stats', { handle }).catch((error: Error) => messages.push(error.message, String(error.stack)));
      await client.get('tiktok', 'channel-stats', { handle: '@bad' }).catch((error: Error) => messages.push(error.message));
      await wrong.close();
      // The job.completed delivery went through the receiver, which logs what it verifies.
      await waitFor(async () => ((await emulator.admin<{ data: unknown[] }>('deliveries')).json.data.length > 0 ? true : undefined));
      logger.warn({ apiKey, secret: created.secret, headers: { authorization: `Bearer ${apiKey}`, 'webhook-signature': 'v1,abc' } }, 'an object holding secrets');
      signatures.push('v1,abc');
      expect(lines.some((line) => line.includes('retrying API call'))).toBe(true);
      const everything = [...lines, ...messages].join('\n');
      expect(everything).not.toContain(apiKey);
      expect(everything).not.toContain(created.secret);
      expect(everything).not.toContain(created.secret.slice('whsec_'.length));
      for (const signature of signatures) expect(everything).not.toContain(signature);
      expect(everything).toContain('[redacted]');
    } finally {
      await receiver.close();
      await client.close();
      await emulator.close();
    }
  });
});
