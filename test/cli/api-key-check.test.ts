/**
 * The API key check of a worker's start (src/cli/api-key-check.ts): a refused key ends the start
 * naming the API, never the key; a key the API accepted is not asked about again for a day, so a
 * run's start does not wait a round trip to the API for it (issue 40: at 250 ms a call, a quarter of
 * `harvester run`'s start). An HTTP server on loopback plays the API's free GET /v1/webhooks.
 */
import { createServer, type Server } from 'node:http';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthenticationError } from '../../src/api/errors.js';
import { assertApiKeyAccepted, KEY_ACCEPTED_FOR_MS } from '../../src/cli/api-key-check.js';
import { createLogger } from '../../src/logger.js';
import { apiKeyAcceptedFile } from '../../src/store/layout.js';

const KEY = 'sk_live_key_check_secret';
let server: Server;
let asked = 0;
let refuse = false;
const savedEnv = { ...process.env };
beforeAll(async () => {
  server = createServer((req, res) => {
    asked += 1;
    res.setHeader('content-type', 'application/json');
    if (refuse || req.headers.authorization !== `Bearer ${KEY}`) {
      res.writeHead(401).end(JSON.stringify({ error: { code: 'invalid_api_key', message: 'the API key is not valid' }, request_id: 'req_0000000000000001' }));
    } else {
      res.writeHead(200).end(JSON.stringify({ data: [], request_id: 'req_0000000000000002' }));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.env.SOCIAL_API_BASE_URL = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  process.env.SOCIAL_API_KEY = KEY;
});
afterAll(async () => {
  process.env = savedEnv;
  await new Promise((resolve) => server.close(resolve));
});

const logger = createLogger({ level: 'silent' });

describe('the API key check at a worker\'s start', () => {
  it('asks once, then takes the key as accepted for a day; past it, a refused key ends the start naming the API, not the key', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'key-check-'));
    await assertApiKeyAccepted(logger, dataDir);
    expect(asked).toBe(1);
    const record = readFileSync(apiKeyAcceptedFile(dataDir), 'utf8');
    expect(record).not.toContain(KEY);
    // Accepted a moment ago: not asked again, even though the API would now refuse it (the run's
    // first call stops it then).
    refuse = true;
    await assertApiKeyAccepted(logger, dataDir);
    expect(asked).toBe(1);
    // A day later: asked again, and refused.
    const aged = { ...JSON.parse(record), acceptedAt: new Date(Date.now() - KEY_ACCEPTED_FOR_MS - 1_000).toISOString() };
    writeFileSync(apiKeyAcceptedFile(dataDir), JSON.stringify(aged));
    const refused = await assertApiKeyAccepted(logger, dataDir).catch((error: unknown) => error);
    expect(asked).toBe(2);
    expect(refused).toBeInstanceOf(AuthenticationError);
    expect((refused as Error).message).toMatch(/^the API at http:\/\/127\.0\.0\.1:\d+ refused SOCIAL_API_KEY: /);
    expect((refused as Error).message).not.toContain(KEY);
  });

  it('asks again for another key, and a refused key writes no record', async () => {
    refuse = false;
    const dataDir = mkdtempSync(join(tmpdir(), 'key-check-other-'));
    await assertApiKeyAccepted(logger, dataDir);
    const before = asked;
    process.env.SOCIAL_API_KEY = 'sk_live_another_key';
    try {
      await expect(assertApiKeyAccepted(logger, dataDir)).rejects.toBeInstanceOf(AuthenticationError);
      expect(asked).toBe(before + 1);
      await expect(assertApiKeyAccepted(logger, dataDir)).rejects.toBeInstanceOf(AuthenticationError);
      expect(asked).toBe(before + 2);
    } finally {
      process.env.SOCIAL_API_KEY = KEY;
    }
  });
});
