import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/project-paths.js';
import { http } from '../support/emulator.js';

const CLI = join(PROJECT_ROOT, 'dist', 'src', 'cli', 'main.js');

describe('harvester emulator', () => {
  it('prints its base URL and key, then serves the API until SIGTERM', async () => {
    const child = spawn(process.execPath, [CLI, 'emulator', '--port', '0', '--seed', '9', '--api-key', 'sk_live_cli_test', '--credits', '500'], { stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      let out = '';
      const baseUrl = await new Promise<string>((resolve, reject) => {
        child.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          const match = /SOCIAL_API_BASE_URL=(\S+)/.exec(out);
          if (match && out.includes('SOCIAL_API_KEY=')) resolve(match[1]!);
        });
        child.once('exit', (code) => reject(new Error(`emulator exited early with ${code}`)));
      });
      expect(baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
      expect(out).toContain('SOCIAL_API_KEY=sk_live_cli_test');
      const catalog = await http<{ data: { tiktok: { handles: string[] } } }>(baseUrl.replace('/v1', '/_emulator/catalog'));
      const profile = await http(`${baseUrl}/tiktok/channel-stats?handle=${catalog.json.data.tiktok.handles[0]}`, { headers: { authorization: 'Bearer sk_live_cli_test' } });
      expect(profile.status).toBe(200);
      expect(profile.headers['x-credits-remaining']).toBe('497');
    } finally {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    }
  });

  it('--help lists every option with examples', () => {
    const result = spawnSync(process.execPath, [CLI, 'emulator', '--help'], { encoding: 'utf8' });
    expect(result.status).toBe(0);
    for (const option of ['--host', '--port', '--seed', '--api-key', '--credits', '--rate-limit', '--fault-rate', '--latency-ms', '--cursor-ttl']) {
      expect(result.stdout).toContain(option);
    }
    expect(result.stdout).toContain('Examples:');
  });

  it('a bad option value gets a clear message naming it, and a non-zero exit', () => {
    const result = spawnSync(process.execPath, [CLI, 'emulator', '--fault-rate', '1.5'], { encoding: 'utf8' });
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain("option '--fault-rate <r>' argument '1.5' is invalid");
    expect(result.stderr).not.toMatch(/\n\s+at /);
    const key = spawnSync(process.execPath, [CLI, 'emulator', '--api-key', 'pk_test_1'], { encoding: 'utf8' });
    expect(key.status).not.toBe(0);
    expect(key.stderr).toContain('sk_live_');
  });
});
