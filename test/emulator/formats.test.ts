import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findEndpoint } from '../../src/api-catalog/endpoints.js';
import { csvColumns } from '../../src/emulator/csv.js';
import { q, startTestEmulator, type TestEmulator } from '../support/emulator.js';

let emulator: TestEmulator;
let handle: string;
let videoUrl: string;

beforeAll(async () => {
  emulator = await startTestEmulator();
  handle = (await emulator.catalog()).tiktok.handles[0]!;
  videoUrl = (await emulator.call<{ data: { url: string }[] }>(`/tiktok/channel-videos?handle=${handle}&limit=1`)).json.data[0]!.url;
});
afterAll(() => emulator.close());

/** RFC 4180 rows, enough to check what the emulator writes (quoted fields may hold commas). */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  for (const line of text.trimEnd().split('\r\n')) {
    const cells: string[] = [];
    let cell = '';
    let quoted = false;
    for (let i = 0; i < line.length; i++) {
      const char = line[i]!;
      if (quoted && char === '"' && line[i + 1] === '"') { cell += '"'; i++; }
      else if (char === '"') quoted = !quoted;
      else if (char === ',' && !quoted) { cells.push(cell); cell = ''; }
      else cell += char;
    }
    cells.push(cell);
    rows.push(cells);
  }
  return rows;
}

describe('formats', () => {
  it('csv on a list: header row, one flattened row per item, the same items as json, cursor in headers', async () => {
    const json = await emulator.call<{ data: { id: string; caption: string; metrics: { views: number } }[]; meta: { cursor: string } }>(`/tiktok/channel-videos?handle=${handle}&limit=5`);
    const csv = await emulator.call(`/tiktok/channel-videos?handle=${handle}&limit=5&format=csv`);
    expect(csv.status).toBe(200);
    expect(csv.headers['content-type']).toMatch(/^text\/csv/);
    expect(csv.headers['x-request-id']).toMatch(/^req_/);
    expect(csv.headers['x-credits-charged']).toBe('15');
    expect(csv.headers['x-has-more']).toBe('true');
    const [header, ...rows] = parseCsv(csv.text);
    expect(header).toEqual(['id', 'url', 'caption', 'posted_at', 'metrics_views', 'metrics_likes', 'metrics_comments']);
    expect(rows.map((row) => row[0])).toEqual(json.json.data.map((item) => item.id));
    expect(rows.map((row) => row[2])).toEqual(json.json.data.map((item) => item.caption));
    expect(rows.map((row) => Number(row[4]))).toEqual(json.json.data.map((item) => item.metrics.views));
    const next = await emulator.call(`/tiktok/channel-videos?handle=${handle}&limit=5&format=csv&cursor=${q(csv.headers['x-next-cursor']!)}`);
    expect(next.status).toBe(200);
    expect(parseCsv(next.text).length).toBe(6);
  });

  it('csv of search results and comments flattens author.handle', async () => {
    const search = parseCsv((await emulator.call(`/tiktok/search?query=yoga&limit=3&format=csv`)).text);
    expect(search[0]).toEqual(['id', 'url', 'caption', 'author_handle', 'metrics_views', 'metrics_likes', 'posted_at']);
    expect(search.length).toBe(4);
    const comments = parseCsv((await emulator.call(`/tiktok/comments?url=${q(videoUrl)}&limit=2&format=csv`)).text);
    expect(comments[0]).toEqual(['id', 'text', 'author_handle', 'likes', 'posted_at']);
  });

  it('an empty csv page still has its header row', async () => {
    const empty = await emulator.call(`/tiktok/search?query=nothing-matches&format=csv`);
    expect(parseCsv(empty.text)).toEqual([['id', 'url', 'caption', 'author_handle', 'metrics_views', 'metrics_likes', 'posted_at']]);
    expect(empty.headers['x-has-more']).toBe('false');
  });

  it('text on transcript and summary is the plain text, charged the same', async () => {
    const json = await emulator.call<{ data: { text: string } }>(`/tiktok/transcript?url=${q(videoUrl)}`);
    const text = await emulator.call(`/tiktok/transcript?url=${q(videoUrl)}&format=text`);
    expect(text.headers['content-type']).toMatch(/^text\/plain/);
    expect(text.text).toBe(json.json.data.text);
    expect(text.headers['x-credits-charged']).toBe('8');
    expect(text.headers['x-request-id']).toMatch(/^req_/);
    const summary = await emulator.call<{ data: { summary: string } }>(`/tiktok/summary?url=${q(videoUrl)}`);
    expect((await emulator.call(`/tiktok/summary?url=${q(videoUrl)}&format=text`)).text).toBe(summary.json.data.summary);
  });
});

describe('csv columns', () => {
  it('are each list item\'s members in the one table of resources, flattened; a list of photo posts has no views column', () => {
    const columnsOf = (platform: string, name: string) => csvColumns(findEndpoint(platform, name)!);
    expect(columnsOf('instagram', 'channel-reels')).toEqual(['id', 'url', 'caption', 'posted_at', 'metrics_views', 'metrics_likes', 'metrics_comments']);
    expect(columnsOf('instagram', 'channel-posts')).toEqual(['id', 'url', 'caption', 'posted_at', 'metrics_likes', 'metrics_comments']);
    expect(columnsOf('instagram', 'reels-search')).toEqual(['id', 'url', 'caption', 'author_handle', 'metrics_views', 'metrics_likes', 'posted_at']);
    expect(columnsOf('instagram', 'comments')).toEqual(['id', 'text', 'author_handle', 'likes', 'posted_at']);
  });
});
