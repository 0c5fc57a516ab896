import { Command } from 'commander';
import { request } from 'undici';
import { startEmulator } from '../../emulator/server.js';

interface DemoCall {
  title: string;
  path: string;
}

/**
 * The README's main command. For now it starts the emulator and makes a few priced calls against
 * it over HTTP, showing what each one cost; the harvest engine will turn it into a full demo.
 */
export function demoCommand(): Command {
  return new Command('demo')
    .description('Start the emulator and show a few priced calls against it')
    .addHelpText('after', '\nExample:\n  $ harvester demo')
    .action(async () => {
      const emulator = await startEmulator({ port: 0 });
      const apiKey = emulator.apiKeys[0] as string;
      try {
        const catalog = (await (await request(`${emulator.origin}/_emulator/catalog`)).body.json()) as {
          data: Record<'tiktok' | 'instagram', { handles: string[]; queries: string[] }>;
        };
        const handle = catalog.data.tiktok.handles[0] as string;
        const first = await call(emulator.baseUrl, apiKey, `/tiktok/channel-videos?handle=${handle}&limit=5`);
        const videoUrl = ((first.json as { data: { url: string }[] }).data[0] as { url: string }).url;
        const calls: DemoCall[] = [
          { title: 'TikTok channel profile', path: `/tiktok/channel-stats?handle=${handle}` },
          { title: 'TikTok video stats', path: `/tiktok/stats?url=${encodeURIComponent(videoUrl)}` },
          { title: 'TikTok video stats again (cached, same price)', path: `/tiktok/stats?url=${encodeURIComponent(videoUrl)}` },
          { title: 'TikTok transcript', path: `/tiktok/transcript?url=${encodeURIComponent(videoUrl)}` },
          { title: 'TikTok comments, 10', path: `/tiktok/comments?url=${encodeURIComponent(videoUrl)}&limit=10` },
          { title: `Instagram reels search "${catalog.data.instagram.queries[0]}", 20`, path: `/instagram/reels-search?query=${encodeURIComponent(catalog.data.instagram.queries[0] as string)}` },
          { title: 'TikTok download (unavailable, not charged)', path: `/tiktok/download?url=${encodeURIComponent(videoUrl)}` },
        ];
        process.stdout.write(`Emulator at ${emulator.baseUrl}\n\n`);
        const rows = [['call', 'status', 'items', 'credits', 'balance', 'cache']];
        rows.push(row(`TikTok @${handle} latest videos, 5`, first));
        for (const demo of calls) rows.push(row(demo.title, await call(emulator.baseUrl, apiKey, demo.path)));
        const widths = rows[0]!.map((_, column) => Math.max(...rows.map((cells) => cells[column]!.length)));
        for (const cells of rows) process.stdout.write(`${cells.map((cell, column) => cell.padEnd(widths[column]!)).join('  ')}\n`);
        const ledger = (await (await request(`${emulator.origin}/_emulator/ledger`)).body.json()) as { data: { credits: number }[] };
        const total = ledger.data.reduce((sum, entry) => sum + entry.credits, 0);
        process.stdout.write(`\nThe emulator's ledger shows ${ledger.data.length} charges, ${total} credits in all. Nothing real was spent.\n`);
        process.stdout.write('Next: `harvester emulator --help` to run it for your own harvests.\n');
      } finally {
        await emulator.close();
      }
    });
}

async function call(baseUrl: string, apiKey: string, path: string) {
  const response = await request(`${baseUrl}${path}`, { headers: { authorization: `Bearer ${apiKey}` } });
  return { status: response.statusCode, headers: response.headers, json: (await response.body.json()) as Record<string, unknown> };
}

function row(title: string, result: Awaited<ReturnType<typeof call>>): string[] {
  const data = result.json.data;
  const items = Array.isArray(data) ? String(data.length) : result.status < 300 ? '1' : '-';
  const error = result.json.error as { code: string } | undefined;
  return [
    title,
    error ? `${result.status} ${error.code}` : String(result.status),
    items,
    String(result.headers['x-credits-charged']),
    String(result.headers['x-credits-remaining']),
    String(result.headers['x-cache'] ?? '-'),
  ];
}
