import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/config-error.js';
import {
  DEFAULT_HARVESTS_FILE,
  findHarvest,
  loadHarvestConfig,
  parseHarvestConfig,
} from '../../src/config/harvest-config.js';
import type { HarvestConfig } from '../../src/harvest/harvest-types.js';
import { ConfigError as ConfigErrorFromPrices, parsePriceTable } from '../../src/config/prices.js';
import { World } from '../../src/emulator/world/world.js';

const FILE = 'harvests-under-test.yaml';

const yaml = (...lines: string[]) => `${lines.join('\n')}\n`;
/** A harvest with a name and a budget; tests add targets and the line under test. */
const HEAD = ['harvests:', '  - name: test-harvest', '    budget: { credits: 1000 }'];
const ONE_CHANNEL = ['    channels:', '      - { platform: tiktok, handle: happy_otter0, content: videos, max_items: 10 }'];

function parse(text: string, env: NodeJS.ProcessEnv = {}): HarvestConfig {
  return parseHarvestConfig(text, FILE, env);
}

function configError(run: () => unknown): ConfigError {
  try {
    run();
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('expected a ConfigError, but nothing was thrown');
}

/** The 1-based line of the only line of `text` that contains `needle`. */
function lineOf(text: string, needle: string): number {
  const hits = text.split('\n').flatMap((line, index) => (line.includes(needle) ? [index + 1] : []));
  if (hits.length !== 1) throw new Error(`test bug: ${JSON.stringify(needle)} is on ${hits.length} lines`);
  return hits[0] as number;
}

/**
 * Parsing `text` fails with `FILE:LINE: PATH: ...`, LINE being the line holding `at`, and the
 * message holds every hint.
 */
function expectProblem(text: string, expected: { at: string; path: string; hints: string[]; env?: NodeJS.ProcessEnv }): ConfigError {
  const error = configError(() => parse(text, expected.env));
  const line = lineOf(text, expected.at);
  const prefix = `${FILE}:${line}: ${expected.path}: `;
  expect(error.message.slice(0, prefix.length), error.message).toBe(prefix);
  expect(error.file).toBe(FILE);
  expect(error.line).toBe(line);
  expect(error.field).toBe(expected.path);
  for (const hint of expected.hints) expect(error.message).toContain(hint);
  return error;
}

const NO_ENRICHMENT = { stats: false, comments: false, transcript: false, summary: false, download: false };

describe('ConfigError', () => {
  it('reads FILE:LINE: FIELD: MESSAGE with a line, FILE: FIELD: MESSAGE without', () => {
    const withLine = new ConfigError('a.yaml', 'harvests[0].name', 'bad', 7, 3);
    expect(withLine.message).toBe('a.yaml:7: harvests[0].name: bad');
    expect([withLine.file, withLine.field, withLine.line, withLine.column, withLine.name]).toEqual(['a.yaml', 'harvests[0].name', 7, 3, 'ConfigError']);
    const without = new ConfigError('a.yaml', 'x', 'bad');
    expect(without.message).toBe('a.yaml: x: bad');
    expect(without.line).toBeUndefined();
    expect(without).toBeInstanceOf(Error);
  });

  it('is still what the price table throws, and still importable from prices.ts', () => {
    expect(ConfigErrorFromPrices).toBe(ConfigError);
    const error = configError(() => parsePriceTable('tiktok: {}\ninstagram: {}\n', 'prices.yaml'));
    expect(error.message).toBe('prices.yaml: tiktok.transcript: expected a whole number of credits ≥ 0, got undefined');
  });
});

describe('valid configs', () => {
  it('parses the example from the issue', () => {
    const text = yaml(
      'harvests:',
      '  - name: creators-daily',
      '    schedule: { cron: "0 6 * * *", timezone: UTC }',
      '    budget: { credits: 5000 }',
      '    channels:',
      '      - { platform: tiktok, handle: some_handle, content: videos, max_items: 200 }',
      '      - { platform: instagram, handle: other, content: reels, max_items: 100 }',
      '    searches:',
      '      - { platform: tiktok, query: sourdough, max_results: 500 }',
      '      - { platform: tiktok, hashtag: booktok, max_results: 1000 }',
      '      - { platform: instagram, query: latte art, max_results: 200 }',
      '    comments:',
      '      - { url: "https://www.tiktok.com/@x/video/7301234567890123456", max_items: 300 }',
      '    enrich: { stats: true, comments: { max_per_item: 50 }, transcript: false, summary: false, download: false }',
    );
    expect(parse(text)).toEqual({
      file: FILE,
      harvests: [
        {
          name: 'creators-daily',
          schedule: { cron: '0 6 * * *', timezone: 'UTC' },
          budget: { credits: 5000 },
          channels: [
            { platform: 'tiktok', handle: 'some_handle', content: 'videos', max_items: 200 },
            { platform: 'instagram', handle: 'other', content: 'reels', max_items: 100 },
          ],
          searches: [
            { platform: 'tiktok', query: 'sourdough', max_results: 500 },
            { platform: 'tiktok', hashtag: 'booktok', max_results: 1000 },
            { platform: 'instagram', query: 'latte art', max_results: 200 },
          ],
          comments: [{ url: 'https://www.tiktok.com/@x/video/7301234567890123456', platform: 'tiktok', max_items: 300 }],
          enrich: { stats: true, comments: { max_per_item: 50 }, transcript: false, summary: false, download: false },
          job_threshold: 500,
          concurrency: { targets: 8, calls: 16 },
          call_deadline_seconds: 120,
        },
      ],
    });
  });

  it('parses config/harvests.yaml, whose handles, queries and URL exist in the emulator world of seed 42', () => {
    const config = loadHarvestConfig(DEFAULT_HARVESTS_FILE, {});
    expect(config.file).toBe(DEFAULT_HARVESTS_FILE);
    expect(config.harvests.map((harvest) => harvest.name)).toHaveLength(2);
    const scheduled = config.harvests.filter((harvest) => harvest.schedule);
    expect(scheduled.map((harvest) => harvest.schedule)).toEqual([{ cron: '0 6 * * *', timezone: 'UTC' }]);

    const now = Date.now();
    const world = new World(42, now);
    const catalog = world.catalog();
    for (const harvest of config.harvests) {
      expect(harvest.budget.credits).toBeGreaterThanOrEqual(1000);
      expect(harvest.budget.credits).toBeLessThanOrEqual(10_000);
      for (const channel of harvest.channels) expect(catalog[channel.platform].handles).toContain(channel.handle);
      for (const search of harvest.searches) {
        const topic = search.query !== undefined ? world.topicOf('keyword', search.query) : world.topicOf('hashtag', search.hashtag as string);
        expect(topic, JSON.stringify(search)).toBeDefined();
        expect(catalog[search.platform].queries).toContain(topic);
      }
      for (const target of harvest.comments) expect(world.itemByUrl(target.platform, target.url, now)).toHaveProperty('found');
    }
    const all = config.harvests.flatMap((harvest) => [...harvest.channels, ...harvest.searches, ...harvest.comments]);
    expect(all.some((target) => 'hashtag' in target)).toBe(true);
    expect(config.harvests.flatMap((harvest) => harvest.comments)).toHaveLength(1);
  });

  it('fills defaults: empty target lists, no enrichment, job threshold 500, concurrency 8 targets and 16 calls; null lists count as empty', () => {
    const config = parse(yaml(...HEAD, ...ONE_CHANNEL, '    searches:', '    enrich:'));
    expect(config.harvests[0]).toEqual({
      name: 'test-harvest',
      budget: { credits: 1000 },
      channels: [{ platform: 'tiktok', handle: 'happy_otter0', content: 'videos', max_items: 10 }],
      searches: [],
      comments: [],
      enrich: NO_ENRICHMENT,
      job_threshold: 500,
      concurrency: { targets: 8, calls: 16 },
      call_deadline_seconds: 120,
    });
    expect(config.harvests[0]).not.toHaveProperty('schedule');
  });

  it('reads enrich.comments as false, true (20 per item) or { max_per_item }', () => {
    const enrichOf = (line: string) => parse(yaml(...HEAD, ...ONE_CHANNEL, line)).harvests[0]?.enrich;
    expect(enrichOf('    enrich: { comments: false }')).toEqual(NO_ENRICHMENT);
    expect(enrichOf('    enrich: { comments: true }')).toEqual({ ...NO_ENRICHMENT, comments: { max_per_item: 20 } });
    expect(enrichOf('    enrich: { comments: { max_per_item: 7 }, transcript: true }')).toEqual({ ...NO_ENRICHMENT, comments: { max_per_item: 7 }, transcript: true });
  });

  it('stores a hashtag without its #, and derives a comment target platform from the URL', () => {
    const config = parse(
      yaml(
        ...HEAD,
        '    searches:',
        '      - { platform: tiktok, hashtag: "#booktok", max_results: 5 }',
        '    comments:',
        '      - { url: "https://www.instagram.com/reel/C0000N84Y3x/", max_items: 3 }',
        '      - { url: "https://www.instagram.com/p/B0050QB4MoG/", platform: instagram, max_items: 4 }',
      ),
    );
    expect(config.harvests[0]?.searches).toEqual([{ platform: 'tiktok', hashtag: 'booktok', max_results: 5 }]);
    expect(config.harvests[0]?.comments.map((target) => target.platform)).toEqual(['instagram', 'instagram']);
  });

  it('accepts bounds: 1 and 100000 items, job threshold 51, credits 1, block style', () => {
    const config = parse(
      yaml(
        'harvests:',
        '  - name: a1',
        '    budget:',
        '      credits: 1',
        '    job_threshold: 51',
        '    channels:',
        '      - platform: instagram',
        '        handle: x.y_z',
        '        content: posts',
        '        max_items: 100000',
        '    searches:',
        '      - { platform: instagram, query: latte art, max_results: 1 }',
      ),
    );
    const harvest = config.harvests[0];
    expect([harvest?.budget.credits, harvest?.job_threshold, harvest?.channels[0]?.max_items, harvest?.searches[0]?.max_results]).toEqual([1, 51, 100000, 1]);
  });
});

describe('findHarvest', () => {
  const config = parse(yaml(...HEAD, ...ONE_CHANNEL, '  - name: second', '    budget: { credits: 5 }', ...ONE_CHANNEL));

  it('finds a harvest by name', () => {
    expect(findHarvest(config, 'second').budget.credits).toBe(5);
  });

  it('names the known harvests when the name is missing', () => {
    const error = configError(() => findHarvest(config, 'thrid'));
    expect(error.message).toBe(`${FILE}: harvests: no harvest named "thrid"; the file has: test-harvest, second`);
  });
});

describe('channels', () => {
  it('rejects videos on instagram', () => {
    const text = yaml(...HEAD, '    channels:', '      - { platform: instagram, handle: someone, content: videos, max_items: 10 }');
    expectProblem(text, { at: 'content: videos', path: 'harvests[0].channels[0].content', hints: ['instagram channel has content posts or reels', 'got "videos"'] });
  });

  it('rejects posts and reels on tiktok, pointing at the right item and line', () => {
    const text = yaml(
      ...HEAD,
      '    channels:',
      '      - { platform: tiktok, handle: someone, content: videos, max_items: 10 }',
      '      - platform: tiktok',
      '        handle: other',
      '        content: reels',
      '        max_items: 10',
    );
    expectProblem(text, { at: 'content: reels', path: 'harvests[0].channels[1].content', hints: ['tiktok channel has content videos', 'got "reels"'] });
  });

  it('rejects a content kind that does not exist', () => {
    const text = yaml(...HEAD, '    channels:', '      - { platform: tiktok, handle: someone, content: shorts, max_items: 10 }');
    expectProblem(text, { at: 'shorts', path: 'harvests[0].channels[0].content', hints: ['videos (tiktok)', 'posts or reels (instagram)', 'got "shorts"'] });
  });

  it('rejects an unknown platform', () => {
    const text = yaml(...HEAD, '    channels:', '      - { platform: youtube, handle: someone, content: videos, max_items: 10 }');
    expectProblem(text, { at: 'youtube', path: 'harvests[0].channels[0].platform', hints: ['tiktok or instagram', 'got "youtube"'] });
  });

  it('tells to drop the @ of a handle', () => {
    const text = yaml(...HEAD, ...ONE_CHANNEL, '      - { platform: tiktok, handle: "@some_handle", content: videos, max_items: 10 }');
    expectProblem(text, { at: '@some_handle', path: 'harvests[0].channels[1].handle', hints: ['drop the @', '"some_handle"', 'got "@some_handle"'] });
  });

  it('rejects a handle with characters handles cannot have', () => {
    const text = yaml(...HEAD, '    channels:', '      - { platform: tiktok, handle: "two words", content: videos, max_items: 10 }');
    expectProblem(text, { at: 'two words', path: 'harvests[0].channels[0].handle', hints: ['letters, digits, _ and .', 'got "two words"'] });
  });

  it.each([
    ['0', 'got 0'],
    ['100001', 'got 100001'],
    ['2.5', 'got 2.5'],
    ['"10"', 'got "10"'],
  ])('rejects max_items %s', (value, got) => {
    const text = yaml(...HEAD, '    channels:', '      - platform: tiktok', '        handle: someone', '        content: videos', `        max_items: ${value}`);
    expectProblem(text, { at: 'max_items', path: 'harvests[0].channels[0].max_items', hints: ['whole number from 1 to 100000', got] });
  });

  it('reports a missing max_items at the channel', () => {
    const text = yaml(...HEAD, '    channels:', '      - { platform: tiktok, handle: someone, content: videos }');
    expectProblem(text, { at: 'handle: someone', path: 'harvests[0].channels[0].max_items', hints: ['missing', 'whole number from 1 to 100000'] });
  });
});

describe('searches', () => {
  it('rejects an unknown platform', () => {
    const text = yaml(...HEAD, '    searches:', '      - { platform: TikTok, query: sourdough, max_results: 10 }');
    expectProblem(text, { at: 'TikTok', path: 'harvests[0].searches[0].platform', hints: ['tiktok or instagram', 'got "TikTok"'] });
  });

  it('needs a query or a hashtag', () => {
    const text = yaml(...HEAD, ...ONE_CHANNEL, '    searches:', '      - { platform: tiktok, max_results: 10 }');
    expectProblem(text, { at: 'max_results: 10', path: 'harvests[0].searches[0]', hints: ['exactly one of query', 'or hashtag', 'neither'] });
  });

  it('takes only one of query and hashtag', () => {
    const text = yaml(...HEAD, '    searches:', '      - platform: tiktok', '        query: sourdough', '        hashtag: booktok', '        max_results: 10');
    expectProblem(text, { at: 'hashtag: booktok', path: 'harvests[0].searches[0].hashtag', hints: ['exactly one of query or hashtag', 'not both', 'got "booktok"'] });
  });

  it('allows hashtags on tiktok only, suggesting a query on instagram', () => {
    const text = yaml(...HEAD, '    searches:', '      - { platform: tiktok, query: sourdough, max_results: 10 }', '      - { platform: instagram, hashtag: "#latteart", max_results: 10 }');
    expectProblem(text, { at: '#latteart', path: 'harvests[0].searches[1].hashtag', hints: ['instagram has no hashtag search', 'query: "latteart"', 'got "#latteart"'] });
  });

  it('rejects a hashtag with spaces and an empty query', () => {
    const spaced = yaml(...HEAD, '    searches:', '      - { platform: tiktok, hashtag: "#latte art", max_results: 10 }');
    expectProblem(spaced, { at: 'latte art', path: 'harvests[0].searches[0].hashtag', hints: ['one hashtag', 'without spaces', 'got "#latte art"'] });
    const empty = yaml(...HEAD, '    searches:', '      - { platform: tiktok, query: "  ", max_results: 10 }');
    expectProblem(empty, { at: 'query', path: 'harvests[0].searches[0].query', hints: ['empty query'] });
  });

  it('bounds max_results', () => {
    const text = yaml(...HEAD, '    searches:', '      - platform: tiktok', '        query: sourdough', '        max_results: 0');
    expectProblem(text, { at: 'max_results', path: 'harvests[0].searches[0].max_results', hints: ['whole number from 1 to 100000', 'got 0'] });
  });
});

describe('comments targets', () => {
  it('rejects a URL that is no content URL of either platform', () => {
    const text = yaml(...HEAD, '    comments:', '      - { url: "https://www.tiktok.com/@someone", max_items: 10 }');
    expectProblem(text, {
      at: 'https://www.tiktok.com/@someone',
      path: 'harvests[0].comments[0].url',
      hints: ['https://www.tiktok.com/@handle/video/ID', 'https://www.instagram.com/reel/CODE/', 'got "https://www.tiktok.com/@someone"'],
    });
  });

  it('rejects a platform that contradicts the URL', () => {
    const text = yaml(...HEAD, '    comments:', '      - { url: "https://www.tiktok.com/@x/video/7301234567890123456",', '          platform: instagram, max_items: 10 }');
    expectProblem(text, { at: 'platform: instagram', path: 'harvests[0].comments[0].platform', hints: ['the url is a tiktok URL', 'got "instagram"'] });
  });
});

describe('harvest fields', () => {
  it('rejects the same target given twice (they would share landings and a checkpoint), naming both', () => {
    const text = yaml(
      ...HEAD,
      '    searches:',
      '      - { platform: tiktok, query: sourdough, max_results: 10 }',
      '      - { platform: tiktok, query: "  sourdough ", max_results: 20 }',
    );
    expectProblem(text, { at: '"  sourdough "', path: 'harvests[0].searches[1]', hints: ['searches[0] names the same target (search:tiktok:keyword:sourdough)'] });
  });

  it('takes concurrency { targets, calls }, 8 and 16 unless given, and rejects 0', () => {
    expect(parse(yaml(...HEAD, ...ONE_CHANNEL)).harvests[0]!.concurrency).toEqual({ targets: 8, calls: 16 });
    expect(parse(yaml(...HEAD, '    concurrency: { calls: 64 }', ...ONE_CHANNEL)).harvests[0]!.concurrency).toEqual({ targets: 8, calls: 64 });
    expectProblem(yaml(...HEAD, '    concurrency: { targets: 0 }', ...ONE_CHANNEL), { at: 'targets: 0', path: 'harvests[0].concurrency.targets', hints: ['whole number from 1 to 256', 'targets listed at once'] });
  });

  it('takes schema_contract for all resources or by resource, absent meaning evolve, and names file, line, field and value of a bad one', () => {
    const contractOf = (line?: string) => parse(yaml(...HEAD, ...(line ? [line] : []), ...ONE_CHANNEL)).harvests[0]!.schema_contract;
    expect(contractOf()).toBeUndefined();
    expect(contractOf('    schema_contract: freeze')).toEqual({ default: 'freeze' });
    expect(contractOf('    schema_contract: { stats: freeze, comments: discard }')).toEqual({ default: 'evolve', resources: { stats: 'freeze', comments: 'discard' } });
    expect(contractOf('    schema_contract: { default: discard, channel-stats: evolve }')).toEqual({ default: 'discard', resources: { 'channel-stats': 'evolve' } });
    expectProblem(yaml(...HEAD, '    schema_contract: frozen', ...ONE_CHANNEL), { at: 'schema_contract: frozen', path: 'harvests[0].schema_contract', hints: ['evolve', 'freeze', 'discard', 'got "frozen"'] });
    expectProblem(yaml(...HEAD, '    schema_contract: { stats: keep }', ...ONE_CHANNEL), {
      at: 'schema_contract: { stats: keep }',
      path: 'harvests[0].schema_contract.stats',
      hints: ['expected a schema contract: evolve, freeze, discard', 'got "keep"'],
    });
    expectProblem(yaml(...HEAD, '    schema_contract: { stat: freeze }', ...ONE_CHANNEL), { at: 'schema_contract: { stat: freeze }', path: 'harvests[0].schema_contract.stat', hints: ['unknown key "stat"', 'did you mean stats?'] });
  });

  it('takes call_deadline_seconds, 120 unless given, and rejects 0 and more than an hour', () => {
    expect(parse(yaml(...HEAD, ...ONE_CHANNEL)).harvests[0]!.call_deadline_seconds).toBe(120);
    expect(parse(yaml(...HEAD, '    call_deadline_seconds: 15', ...ONE_CHANNEL)).harvests[0]!.call_deadline_seconds).toBe(15);
    expectProblem(yaml(...HEAD, '    call_deadline_seconds: 0', ...ONE_CHANNEL), { at: 'call_deadline_seconds: 0', path: 'harvests[0].call_deadline_seconds', hints: ['whole number from 1 to 3600', 'one billed call may take'] });
    expectProblem(yaml(...HEAD, '    call_deadline_seconds: 7200', ...ONE_CHANNEL), { at: 'call_deadline_seconds: 7200', path: 'harvests[0].call_deadline_seconds', hints: ['got 7200'] });
  });

  it('needs a budget', () => {
    const text = yaml('harvests:', '  - name: no-budget', ...ONE_CHANNEL);
    expectProblem(text, { at: 'name: no-budget', path: 'harvests[0].budget', hints: ['missing', 'budget: { credits: N }', 'hard cap'] });
  });

  it.each([
    ['0', 'got 0'],
    ['1.5', 'got 1.5'],
    ['lots', 'got "lots"'],
  ])('needs whole credits ≥ 1, not %s', (value, got) => {
    const text = yaml('harvests:', '  - name: h', `    budget: { credits: ${value} }`, ...ONE_CHANNEL);
    expectProblem(text, { at: 'credits', path: 'harvests[0].budget.credits', hints: ['whole number ≥ 1 of credits', got] });
  });

  it('needs names of lowercase letters, digits and -', () => {
    const text = yaml('harvests:', '  - name: Creators Daily', '    budget: { credits: 10 }', ...ONE_CHANNEL);
    expectProblem(text, { at: 'Creators Daily', path: 'harvests[0].name', hints: ['lowercase letters, digits and -', 'got "Creators Daily"'] });
  });

  it('needs unique names, reporting the second one', () => {
    const text = yaml(...HEAD, ...ONE_CHANNEL, '  - name: other', '    budget: { credits: 10 }', ...ONE_CHANNEL, '  - name: test-harvest # again', '    budget: { credits: 10 }', ...ONE_CHANNEL);
    expectProblem(text, { at: '# again', path: 'harvests[2].name', hints: ['unique', 'harvests[0] has this name too', 'got "test-harvest"'] });
  });

  it('needs a cron expression of 5 fields', () => {
    const text = yaml(...HEAD, ...ONE_CHANNEL, '    schedule:', '      cron: "0 6 * *"', '      timezone: UTC');
    expectProblem(text, { at: 'cron:', path: 'harvests[0].schedule.cron', hints: ['5 fields', 'e.g. "0 6 * * *"', 'got "0 6 * *"'] });
  });

  it('needs an IANA time zone, spelled as the zone database spells it', () => {
    const bad = yaml(...HEAD, ...ONE_CHANNEL, '    schedule:', '      cron: "0 6 * * *"', '      timezone: Mars/Olympus_Mons');
    expectProblem(bad, { at: 'Mars', path: 'harvests[0].schedule.timezone', hints: ['IANA time zone', 'Europe/Berlin', 'got "Mars/Olympus_Mons"'] });
    const lower = yaml(...HEAD, ...ONE_CHANNEL, '    schedule:', '      cron: "0 6 * * *"', '      timezone: europe/berlin');
    expectProblem(lower, { at: 'europe/berlin', path: 'harvests[0].schedule.timezone', hints: ['"Europe/Berlin"', 'got "europe/berlin"'] });
    expect(parse(yaml(...HEAD, ...ONE_CHANNEL, '    schedule: { cron: "30 5 * * 1-5", timezone: America/New_York }')).harvests[0]?.schedule).toEqual({
      cron: '30 5 * * 1-5',
      timezone: 'America/New_York',
    });
  });

  it('needs at least one target', () => {
    const text = yaml('harvests:', '  - name: empty-handed', '    budget: { credits: 10 }', '    channels: []', '    enrich: { stats: true }');
    expectProblem(text, { at: 'empty-handed', path: 'harvests[0]', hints: ['at least one target', 'channels, searches or comments'] });
  });

  it('needs a job threshold ≥ 51', () => {
    const text = yaml(...HEAD, ...ONE_CHANNEL, '    job_threshold: 50');
    expectProblem(text, { at: 'job_threshold', path: 'harvests[0].job_threshold', hints: ['whole number ≥ 51', 'async job', 'got 50'] });
  });

  it('checks enrich values', () => {
    const zero = yaml(...HEAD, ...ONE_CHANNEL, '    enrich:', '      comments: { max_per_item: 0 }');
    expectProblem(zero, { at: 'max_per_item', path: 'harvests[0].enrich.comments.max_per_item', hints: ['whole number from 1 to 100000', 'got 0'] });
    const word = yaml(...HEAD, ...ONE_CHANNEL, '    enrich:', '      comments: "yes"');
    expectProblem(word, { at: 'comments: "yes"', path: 'harvests[0].enrich.comments', hints: ['false, true (20 per item) or { max_per_item: N }', 'got "yes"'] });
    const flag = yaml(...HEAD, ...ONE_CHANNEL, '    enrich:', '      transcript: 1');
    expectProblem(flag, { at: 'transcript', path: 'harvests[0].enrich.transcript', hints: ['true or false', 'got 1'] });
  });

  it('needs at least one harvest, in a mapping', () => {
    expectProblem(yaml('harvests: []'), { at: 'harvests', path: 'harvests', hints: ['at least one harvest'] });
    expectProblem(yaml('# nothing yet', 'harvests:'), { at: 'harvests:', path: 'harvests', hints: ['a list of harvests', 'got null'] });
    expectProblem(yaml('# a list, not a mapping', '- name: x'), { at: '- name', path: '(document)', hints: ['a mapping with a `harvests` list'] });
    const empty = configError(() => parse('# only a comment\n'));
    expect(empty.message).toBe(`${FILE}:1: (document): the file is empty: expected a mapping with a \`harvests\` list`);
  });
});

describe('unknown keys', () => {
  it('reports a typo with its line and the key meant', () => {
    const text = yaml(...HEAD, '    channels:', '      - platform: tiktok', '        handle: someone', '        content: videos', '        max_item: 10');
    const error = expectProblem(text, {
      at: 'max_item',
      path: 'harvests[0].channels[0].max_item',
      hints: ['unknown key "max_item"', 'did you mean max_items?', 'allowed keys: platform, handle, content, max_items'],
    });
    // The missing max_items it causes is listed after it, not first.
    expect(error.message.split('\n')).toHaveLength(2);
    expect(error.more.map((problem) => problem.field)).toEqual(['harvests[0].channels[0].max_items']);
  });

  it('reads tracking: accounts, and items with their window in days', () => {
    const harvest = parse(yaml(...HEAD, ...ONE_CHANNEL, '    track:', '      items: { days: 7 }', '      accounts: true')).harvests[0]!;
    expect(harvest.track).toEqual({ accounts: true, items: { days: 7 } });
    expect(parse(yaml(...HEAD, ...ONE_CHANNEL, '    track: { items: { days: 30 } }')).harvests[0]!.track).toEqual({ accounts: false, items: { days: 30 } });
  });

  it('reports unknown keys at every level', () => {
    expectProblem(yaml('harvest:', '  - name: x'), { at: 'harvest:', path: 'harvest', hints: ['unknown key "harvest"', 'did you mean harvests?'] });
    expectProblem(yaml(...HEAD, ...ONE_CHANNEL, '    budgets: { credits: 5 }'), { at: 'budgets', path: 'harvests[0].budgets', hints: ['did you mean budget?'] });
    expectProblem(yaml(...HEAD, ...ONE_CHANNEL, '    enrich:', '      stats: true', '      transcripts: true'), {
      at: 'transcripts',
      path: 'harvests[0].enrich.transcripts',
      hints: ['did you mean transcript?', 'allowed keys: stats, comments, transcript, summary, download'],
    });
    // Tracking knows accounts and items, nothing else.
    expectProblem(yaml(...HEAD, ...ONE_CHANNEL, '    track:', '      item: { days: 30 }'), {
      at: 'item: { days',
      path: 'harvests[0].track.item',
      hints: ['unknown key "item"', 'did you mean items?', 'allowed keys: accounts, items'],
    });
    expectProblem(yaml(...HEAD, ...ONE_CHANNEL, '    track:', '      items: { days: 90 }'), {
      at: 'days: 90',
      path: 'harvests[0].track.items.days',
      hints: ['expected a whole number from 1 to 30 of days'],
    });
    expectProblem(yaml(...HEAD, ...ONE_CHANNEL, '    enrich:', '      comments: { max_per_items: 5 }'), {
      at: 'max_per_items',
      path: 'harvests[0].enrich.comments.max_per_items',
      hints: ['did you mean max_per_item?'],
    });
    expectProblem(yaml(...HEAD, ...ONE_CHANNEL, '    schedule: { cron: "0 6 * * *", timezone: UTC, tz: UTC }'), { at: 'tz: UTC', path: 'harvests[0].schedule.tz', hints: ['unknown key "tz"', 'allowed keys: cron, timezone'] });
  });
});

describe('environment variables', () => {
  it('substitutes ${VAR} in string values, keeps $${VAR} literal, and types plain scalars', () => {
    const text = yaml(
      'harvests:',
      '  - name: ${HARVEST_NAME}',
      '    budget:',
      '      credits: ${BUDGET}',
      '    channels:',
      '      - { platform: tiktok, handle: "${WHO}_${N}", content: videos, max_items: 10 }',
      '    searches:',
      '      - { platform: tiktok, query: "price $${NOT_A_VAR} ${TOPIC}", max_results: 10 }',
    );
    const harvest = parse(text, { HARVEST_NAME: 'from-env', BUDGET: '2500', WHO: 'happy_otter', N: '0', TOPIC: 'sourdough' }).harvests[0];
    expect(harvest?.name).toBe('from-env');
    expect(harvest?.budget.credits).toBe(2500);
    expect(harvest?.channels[0]?.handle).toBe('happy_otter_0');
    expect(harvest?.searches[0]?.query).toBe('price ${NOT_A_VAR} sourdough');
  });

  it('names an unset variable, its path and its line', () => {
    const text = yaml(...HEAD, ...ONE_CHANNEL, '    searches:', '      - { platform: tiktok, query: "${SEARCH_WORDS}", max_results: 10 }');
    expectProblem(text, {
      at: 'SEARCH_WORDS',
      path: 'harvests[0].searches[0].query',
      env: { OTHER: 'x' },
      hints: ['environment variable SEARCH_WORDS is not set', '$${SEARCH_WORDS}'],
    });
  });

  it('uses the env it is given, not process.env', () => {
    process.env.HARVEST_TEST_ONLY_IN_PROCESS = 'x';
    try {
      const text = yaml(...HEAD, '    searches:', '      - platform: tiktok', '        query: ${HARVEST_TEST_ONLY_IN_PROCESS}', '        max_results: 10');
      expectProblem(text, { at: 'query:', path: 'harvests[0].searches[0].query', hints: ['HARVEST_TEST_ONLY_IN_PROCESS is not set'] });
    } finally {
      delete process.env.HARVEST_TEST_ONLY_IN_PROCESS;
    }
  });

  it('rejects ${} with no variable name', () => {
    const text = yaml(...HEAD, '    searches:', '      - { platform: tiktok, query: "a ${} b", max_results: 10 }');
    expectProblem(text, { at: '${}', path: 'harvests[0].searches[0].query', hints: ['not a variable reference'] });
  });

  it('keeps a quoted substitution a string, so a number field says what it got', () => {
    const text = yaml('harvests:', '  - name: h', '    budget: { credits: "${BUDGET}" }', ...ONE_CHANNEL);
    expectProblem(text, { at: 'credits', path: 'harvests[0].budget.credits', env: { BUDGET: '300' }, hints: ['whole number', 'got "300"'] });
  });
});

describe('YAML and file errors', () => {
  it('reports invalid YAML with the line from the parser', () => {
    const text = yaml(...HEAD, '    channels:', '      - { platform: tiktok, handle: x, content: videos, max_items: 10', '    searches: []');
    expectProblem(text, { at: 'searches: []', path: '(document)', hints: ['not valid YAML', 'Flow map', 'end with a }'] });
  });

  it('says to quote a value that YAML reads as an alias or a reserved character', () => {
    expectProblem(yaml(...HEAD, ...ONE_CHANNEL, '    schedule: { cron: * * * * *, timezone: UTC }'), { at: 'cron', path: '(document)', hints: ['not valid YAML', 'must be quoted'] });
    expectProblem(yaml(...HEAD, '    channels:', '      - handle: @someone'), { at: '@someone', path: '(document)', hints: ['reserved character @', 'must be quoted'] });
  });

  it('reports duplicate keys', () => {
    const text = yaml(...HEAD, ...ONE_CHANNEL, '    budget: { credits: 2 }');
    expectProblem(text, { at: 'credits: 2', path: '(document)', hints: ['not valid YAML', 'unique'] });
  });

  it('reports an unquoted ${VAR} inside a flow mapping with a hint', () => {
    const text = yaml('harvests:', '  - name: h', '    budget: { credits: ${BUDGET} }', ...ONE_CHANNEL);
    expectProblem(text, { at: 'credits', path: '(document)', env: { BUDGET: '5' }, hints: ['not valid YAML', 'must be quoted', 'block style'] });
  });

  it('survives a self-referencing alias', () => {
    const text = yaml(...HEAD, '    channels: &loop [*loop]');
    expect(configError(() => parse(text)).message).toContain('contains itself');
  });

  it('reports every problem, in reading order, each with its line and field', () => {
    const text = yaml(
      ...HEAD,
      '    channels:',
      '      - { platform: tiktok, handle: "@first", content: videos, max_items: 10 }',
      '      - { platform: tiktok, handle: second, content: reels, max_items: 0 }',
    );
    const error = expectProblem(text, { at: '@first', path: 'harvests[0].channels[0].handle', hints: ['drop the @'] });
    const lines = error.message.split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[1]).toMatch(new RegExp(`^${FILE.replace(/\./g, '\\.')}:${lineOf(text, 'second')}: harvests\\[0\\]\\.channels\\[1\\]\\.(content|max_items): `));
    expect(lines[2]).toMatch(new RegExp(`^${FILE.replace(/\./g, '\\.')}:${lineOf(text, 'second')}: harvests\\[0\\]\\.channels\\[1\\]\\.(content|max_items): `));
    expect(error.more.map((problem) => problem.field).sort()).toEqual(['harvests[0].channels[1].content', 'harvests[0].channels[1].max_items']);
  });

  describe('files', () => {
    const dir = mkdtempSync(join(tmpdir(), 'harvest-config-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it('names a file that cannot be read', () => {
      const missing = join(dir, 'nope.yaml');
      const error = configError(() => loadHarvestConfig(missing, {}));
      expect(error.message).toBe(`${missing}: (file): cannot read the harvest config: no such file (ENOENT)`);
      expect(configError(() => loadHarvestConfig(dir, {})).message).toContain(`${dir}: (file): cannot read the harvest config`);
    });

    it('names the file it read in errors and in the config', () => {
      const file = join(dir, 'harvests.yaml');
      writeFileSync(file, readFileSync(DEFAULT_HARVESTS_FILE, 'utf8').replace('handle: happy_otter0', 'handle: "@happy_otter0"'));
      const error = configError(() => loadHarvestConfig(file, {}));
      expect(error.message).toMatch(new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:\\d+: harvests\\[0\\]\\.channels\\[0\\]\\.handle: drop the @`));
      writeFileSync(file, yaml(...HEAD, ...ONE_CHANNEL));
      expect(loadHarvestConfig(file, {}).file).toBe(file);
    });
  });
});

describe('module boundaries', () => {
  it('keeps harvest-types.ts free of runtime imports (Temporal workflows import it)', () => {
    const source = readFileSync(new URL('../../src/harvest/harvest-types.ts', import.meta.url), 'utf8');
    expect(source).not.toMatch(/^\s*import(?!\s+type\b)/m);
    expect(source).not.toMatch(/^\s*export\s+(const|function|class|let|var)\b/m);
  });
});
