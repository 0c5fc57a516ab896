import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { startTestEmulator, type TestEmulator } from '../support/emulator.js';

let emulator: TestEmulator;
let env: Record<string, string>;
let handle: string;

beforeAll(async () => {
  emulator = await startTestEmulator({ jobStepMs: 20 });
  env = { SOCIAL_API_BASE_URL: emulator.baseUrl, SOCIAL_API_KEY: emulator.apiKey, HARVESTER_DATA_DIR: mkdtempSync(join(tmpdir(), 'cli-data-')) };
  handle = (await emulator.catalog()).tiktok.handles[0]!;
});
afterAll(() => emulator.close());

describe('harvester call', () => {
  it('prints one object as JSON and a one-line summary on stderr', async () => {
    const result = await runCli(['call', 'tiktok', 'channel-stats', '--handle', handle], env);
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({ platform: 'tiktok', handle });
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(/^tiktok\/channel-stats: 1 item, 3 credits charged, \d+ left, cache MISS \(request req_\w+\)$/m);
  });

  it('--max-items prints NDJSON, one item a line, and buys no item beyond the bound', async () => {
    const before = (await emulator.ledger()).length;
    const result = await runCli(['call', 'tiktok', 'channel-videos', '--handle', handle, '--max-items', '73'], env);
    expect(result.code).toBe(0);
    const lines = result.stdout.trim().split('\n');
    expect(lines).toHaveLength(73);
    expect(new Set(lines.map((line) => (JSON.parse(line) as { id: string }).id)).size).toBe(73);
    expect(result.stderr).toContain('73 items in 2 pages, 219 credits charged');
    const rows = (await emulator.ledger()).slice(before);
    expect(rows.map((row) => row.units)).toEqual([50, 23]);
  });

  it('a limit above 50 runs as a job', async () => {
    const result = await runCli(['call', 'instagram', 'reels-search', '--query', 'latte art', '--limit', '120'], env);
    expect(result.code).toBe(0);
    expect((JSON.parse(result.stdout) as unknown[]).length).toBe(120);
    expect(result.stderr).toMatch(/job job_\w+, 120 items, 360 credits charged/);
  });

  it('csv goes to stdout as the API sent it', async () => {
    const result = await runCli(['call', 'tiktok', 'channel-videos', '--handle', handle, '--limit', '2', '--format', 'csv'], env);
    expect(result.code).toBe(0);
    expect(result.stdout.split('\r\n')[0]).toBe('id,url,caption,posted_at,metrics_views,metrics_likes,metrics_comments');
    expect(result.stderr).toContain('next cursor');
  });

  it('bad arguments and API errors give a clear message, no stack trace, and distinct exit codes', async () => {
    const wrongParam = await runCli(['call', 'tiktok', 'channel-stats', '--url', 'https://www.tiktok.com/@x/video/1'], env);
    expect(wrongParam.code).toBe(1);
    expect(wrongParam.stderr).toContain('tiktok/channel-stats takes --handle');
    const unknown = await runCli(['call', 'tiktok', 'channel-shorts', '--handle', handle], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('tiktok has no endpoint "channel-shorts"');
    const api = await runCli(['call', 'tiktok', 'channel-stats', '--handle', `@${handle}`], env);
    expect(api.code).toBe(2);
    expect(api.stderr).toMatch(/harvester: invalid_parameter: handle must be given without a leading @.*\(request req_\w+\)/);
    const noKey = await runCli(['call', 'tiktok', 'channel-stats', '--handle', handle], { ...env, SOCIAL_API_KEY: '' });
    expect(noKey.code).toBe(1);
    expect(noKey.stderr).toContain('SOCIAL_API_KEY is not set');
    for (const result of [wrongParam, unknown, api, noKey]) expect(result.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('harvester webhooks', () => {
  it('register stores the secret (owner-only) and shows it masked; list and delete work', async () => {
    const registered = await runCli(['webhooks', 'register', '--url', 'https://localhost:9/hooks', '--events', 'job.completed,credits.low'], env);
    expect(registered.code).toBe(0);
    const [webhookId] = registered.stdout.trim().split('\t');
    expect(webhookId).toMatch(/^wh_/);
    const store = join(env.HARVESTER_DATA_DIR!, 'webhooks', 'secrets.json');
    const saved = JSON.parse(readFileSync(store, 'utf8')) as { webhook_id: string; secret: string }[];
    expect(saved).toEqual([expect.objectContaining({ webhook_id: webhookId })]);
    expect(statSync(store).mode & 0o777).toBe(0o600);
    expect(registered.stderr).not.toContain(saved[0]!.secret);
    expect(registered.stderr).toContain(`…${saved[0]!.secret.slice(-4)}`);
    const listed = await runCli(['webhooks', 'list', '--json'], env);
    expect(JSON.parse(listed.stdout)).toEqual([expect.objectContaining({ webhook_id: webhookId, events: ['job.completed', 'credits.low'] })]);
    expect(listed.stdout).not.toContain('whsec_');
    const deleted = await runCli(['webhooks', 'delete', webhookId!], env);
    expect(deleted.code).toBe(0);
    expect(JSON.parse(readFileSync(store, 'utf8'))).toEqual([]);
    const again = await runCli(['webhooks', 'delete', webhookId!], env);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('webhook_not_found');
  });

  it('register refuses an unknown event name before calling the API', async () => {
    const result = await runCli(['webhooks', 'register', '--url', 'https://localhost:9/hooks', '--events', 'job.done'], env);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('unknown event "job.done"');
  });
});
