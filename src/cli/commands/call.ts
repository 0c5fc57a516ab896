import { Command, Option } from 'commander';
import type { ListEndpoint, ObjectEndpoint, SocialApiClient } from '../../api/client.js';
import { ENDPOINTS, PAGE_LIMITS, PLATFORMS, findEndpoint, type EndpointName, type EndpointSpec, type Platform } from '../../api-catalog/endpoints.js';
import { clientFromEnv, cliLogger } from '../context.js';
import { UsageError, wholeNumber } from '../options.js';

interface CallOptions {
  url?: string;
  handle?: string;
  query?: string;
  limit?: number;
  maxItems?: number;
  cursor?: string;
  fresh?: boolean;
  format: 'json' | 'csv' | 'text';
}

export function callCommand(): Command {
  return new Command('call')
    .description('Make one API call, or a bounded pull, and print the data (stdout) and what it cost (stderr)')
    .argument('<platform>', `one of ${PLATFORMS.join(', ')}`)
    .argument('<endpoint>', 'an endpoint of that platform, e.g. channel-videos')
    .option('--url <url>', 'content URL (transcript, summary, stats, comments, download)')
    .option('--handle <handle>', 'account handle without @ (channel-*)')
    .option('--query <query>', 'search keywords, or the hashtag for hashtag-search')
    .option('--limit <n>', `page size (max ${PAGE_LIMITS.maxSynchronous}); above that, up to ${PAGE_LIMITS.maxJob}, the pull runs as a job`, wholeNumber(1, PAGE_LIMITS.maxJob))
    .option('--max-items <n>', 'follow pages until this many items, buying none beyond it; prints NDJSON', wholeNumber(1))
    .option('--cursor <cursor>', 'resume a list from a cursor')
    .option('--fresh', 'bypass the API cache (same price)')
    .addOption(new Option('--format <format>', 'response format').choices(['json', 'csv', 'text']).default('json'))
    .addHelpText(
      'after',
      `
Reads SOCIAL_API_BASE_URL and SOCIAL_API_KEY from the environment.

Examples:
  $ harvester call tiktok channel-stats --handle happy_otter0
  $ harvester call tiktok channel-videos --handle happy_otter0 --max-items 120 > videos.ndjson
  $ harvester call instagram reels-search --query "latte art" --format csv
  $ harvester call tiktok search --query sourdough --limit 500 > results.json   # runs as a job

Endpoints: ${[...new Set(ENDPOINTS.map((spec) => spec.name))].join(', ')}`,
    )
    .action(call);
}

async function call(platformArg: string, endpointArg: string, options: CallOptions): Promise<void> {
  const spec = checkedEndpoint(platformArg, endpointArg, options);
  const client = clientFromEnv(cliLogger());
  try {
    await printCall(client, spec, options);
  } finally {
    await client.close();
  }
}

/** The endpoint the arguments name, with options that fit it; a usage error otherwise, before any request. */
function checkedEndpoint(platformArg: string, endpointArg: string, options: CallOptions): EndpointSpec {
  if (!(PLATFORMS as readonly string[]).includes(platformArg)) throw new UsageError(`unknown platform ${JSON.stringify(platformArg)}; use ${PLATFORMS.join(' or ')}`);
  const platform = platformArg as Platform;
  const spec = findEndpoint(platform, endpointArg);
  if (!spec) {
    const names = ENDPOINTS.filter((candidate) => candidate.platform === platform).map((candidate) => candidate.name);
    throw new UsageError(`${platform} has no endpoint ${JSON.stringify(endpointArg)}; use one of ${names.join(', ')}`);
  }
  const given = (['url', 'handle', 'query'] as const).filter((name) => options[name] !== undefined);
  if (given.length !== 1 || given[0] !== spec.param) throw new UsageError(`${platform}/${spec.name} takes --${spec.param} (and no --url/--handle/--query besides)`);
  if (spec.shape === 'object' && (options.limit !== undefined || options.maxItems !== undefined || options.cursor !== undefined)) {
    throw new UsageError(`${platform}/${spec.name} returns one object; --limit, --max-items and --cursor apply to lists`);
  }
  if (options.maxItems !== undefined && options.limit !== undefined && options.limit > PAGE_LIMITS.maxSynchronous) {
    throw new UsageError(`--max-items pages synchronously: give a --limit of at most ${PAGE_LIMITS.maxSynchronous} with it, or use --limit alone for a job`);
  }
  return spec;
}

/** Makes the call the options say (one call, a job, or pages up to --max-items) and prints its data (stdout) and what it cost (stderr). */
async function printCall(client: SocialApiClient, spec: EndpointSpec, options: CallOptions): Promise<void> {
  const platform = spec.platform;
  const params = { [spec.param]: options[spec.param], fresh: options.fresh };
  const summary = (text: string) => process.stderr.write(`${text}\n`);
  if (options.format !== 'json') {
    const result = await client.raw(platform, spec.name as EndpointName, { ...params, limit: options.limit, cursor: options.cursor, format: options.format });
    process.stdout.write(result.text);
    summary(`${platform}/${spec.name}: ${result.creditsCharged} credits charged, ${result.creditsRemaining} left (request ${result.requestId})${result.nextCursor ? `; next cursor: ${result.nextCursor}` : ''}`);
  } else if (spec.shape === 'object') {
    const result = await client.get(platform, spec.name as ObjectEndpoint, params);
    process.stdout.write(`${JSON.stringify(result.data, null, 2)}\n`);
    summary(`${platform}/${spec.name}: 1 item, ${result.creditsCharged} credits charged, ${result.creditsRemaining} left, cache ${result.cache} (request ${result.requestId})`);
  } else if (options.limit !== undefined && options.limit > PAGE_LIMITS.maxSynchronous) {
    const { job } = await client.startJob(platform, spec.name as ListEndpoint, { ...params, limit: options.limit, cursor: options.cursor });
    summary(`${platform}/${spec.name}: started ${job.job_id} for up to ${options.limit} items; waiting`);
    const done = await client.waitForJob(job.job_id);
    if (done.status === 'failed') throw new Error(`job ${done.job_id} failed: ${done.error?.code}: ${done.error?.message}`);
    const items: unknown[] = [];
    for await (const page of client.jobResults(done.job_id)) items.push(...page.items);
    process.stdout.write(`${JSON.stringify(items, null, 2)}\n`);
    summary(`${platform}/${spec.name}: job ${done.job_id}, ${done.item_count} items, ${done.credits_charged} credits charged`);
  } else if (options.maxItems !== undefined) {
    let items = 0;
    let pages = 0;
    let credits = 0;
    let remaining: number | undefined;
    let cursor: string | undefined;
    for await (const page of client.pages(platform, spec.name as ListEndpoint, params, { maxItems: options.maxItems, pageSize: options.limit, cursor: options.cursor })) {
      for (const item of page.items) process.stdout.write(`${JSON.stringify(item)}\n`);
      items += page.items.length;
      pages++;
      credits += page.creditsCharged;
      remaining = page.creditsRemaining;
      cursor = page.nextCursor;
    }
    summary(`${platform}/${spec.name}: ${items} items in ${pages} pages, ${credits} credits charged, ${remaining} left${cursor ? `; resume with --cursor ${cursor}` : ''}`);
  } else {
    const page = await client.page(platform, spec.name as ListEndpoint, { ...params, limit: options.limit, cursor: options.cursor });
    process.stdout.write(`${JSON.stringify({ data: page.items, meta: page.meta }, null, 2)}\n`);
    summary(`${platform}/${spec.name}: ${page.items.length} items, 1 page, ${page.creditsCharged} credits charged, ${page.creditsRemaining} left (request ${page.requestId})`);
  }
}
