/**
 * The harvest config's schema (zod): what each field may hold, its default, and the message that
 * says what is expected.
 */
import { z } from 'zod';
import { parseContentUrl } from '../api-catalog/content-urls.js';
import { ENDPOINTS, PAGE_LIMITS, PLATFORMS, type EndpointName, type Platform } from '../api-catalog/endpoints.js';
import type { CommentTarget, Enrichment, Harvest, SearchTarget } from '../harvest/harvest-types.js';
import { DEFAULT_CONCURRENCY, MAX_CONCURRENCY } from '../harvest/rules.js';
import { planTargets } from '../harvest/targets.js';
import { MAX_TRACKED_DAYS } from '../harvest/tracking.js';
import { SCHEMA_CONTRACTS, type HarvestSchemaContract, type SchemaContract } from '../harvest/schema-contract.js';

const MAX_TARGET_ITEMS = 100_000;
const DEFAULT_JOB_THRESHOLD = 500;
/** A billed call's overall deadline, in seconds, retries included: a slow drip of bytes cannot hold a run past it. */
const DEFAULT_CALL_DEADLINE_SECONDS = 120;
/** A limit above the synchronous page size always makes a job, so a lower threshold means nothing. */
const MIN_JOB_THRESHOLD = PAGE_LIMITS.maxSynchronous + 1;
/** What `enrich: { comments: true }` means. */
const DEFAULT_COMMENTS_PER_ITEM = 20;

export const DOCUMENT_HINT = 'a mapping with a `harvests` list';
const NAME_PATTERN = /^[a-z0-9][a-z0-9-]*$/;
const HANDLE_PATTERN = /^[A-Za-z0-9_.]+$/;

const nullAsMissing = (value: unknown) => (value === null ? undefined : value);

/** A mapping that rejects unknown keys, naming the allowed ones (and the likely one meant). */
function mapping<Shape extends z.core.$ZodLooseShape>(shape: Shape, what: string) {
  const allowed = Object.keys(shape);
  return z.strictObject(shape, {
    error: (issue) => {
      if (issue.code !== 'unrecognized_keys') return `expected ${what}`;
      const [key = '', ...others] = issue.keys;
      const guess = closest(key, allowed);
      const also = others.length > 0 ? ` (also unknown here: ${others.join(', ')})` : '';
      return `unknown key ${JSON.stringify(key)}${guess ? `, did you mean ${guess}?` : ''}; allowed keys: ${allowed.join(', ')}${also}`;
    },
  });
}

function wholeNumber(min: number, max: number, about = '') {
  const range = max >= Number.MAX_SAFE_INTEGER ? `≥ ${min}` : `from ${min} to ${max}`;
  const error = `expected a whole number ${range}${about}`;
  return z.number({ error }).int({ error }).min(min, { error }).max(max, { error });
}

const platformSchema = z.enum(PLATFORMS, { error: `expected a platform: ${PLATFORMS.join(' or ')}` });
const itemCount = wholeNumber(1, MAX_TARGET_ITEMS);

const handleSchema = z.string({ error: 'expected a handle (text, without @)' }).check((ctx) => {
  const handle = ctx.value;
  if (handle.startsWith('@')) {
    ctx.issues.push({ code: 'custom', input: handle, message: `drop the @: write the handle as ${JSON.stringify(handle.replace(/^@+/, ''))}` });
  } else if (!HANDLE_PATTERN.test(handle)) {
    ctx.issues.push({ code: 'custom', input: handle, message: 'expected a handle of letters, digits, _ and . (without @)' });
  }
});

const CONTENT_BY_PLATFORM: Record<Platform, readonly string[]> = { tiktok: ['videos'], instagram: ['posts', 'reels'] };

const channelSchema = mapping(
  {
    platform: platformSchema,
    handle: handleSchema,
    content: z.enum(['videos', 'posts', 'reels'], { error: 'expected content videos (tiktok), or posts or reels (instagram)' }),
    max_items: itemCount,
  },
  'a channel: { platform, handle, content, max_items }',
).check((ctx) => {
  const { platform, content } = ctx.value;
  const kinds = CONTENT_BY_PLATFORM[platform];
  if (!kinds.includes(content)) {
    ctx.issues.push({
      code: 'custom',
      input: content,
      path: ['content'],
      message: `a ${platform} channel has content ${kinds.join(' or ')}`,
    });
  }
});

const searchSchema = mapping(
  {
    platform: platformSchema,
    query: z.string({ error: 'expected search words' }).trim().min(1, { error: 'expected search words, not an empty query' }).optional(),
    hashtag: z
      .string({ error: 'expected a hashtag, with or without #' })
      .regex(/^#?[^\s#]+$/, { error: 'expected one hashtag, with or without # and without spaces' })
      .optional(),
    max_results: itemCount,
  },
  'a search: { platform, query or hashtag, max_results }',
)
  .check((ctx) => {
    const { platform, query, hashtag } = ctx.value;
    if (query === undefined && hashtag === undefined) {
      ctx.issues.push({ code: 'custom', input: ctx.value, message: 'a search needs exactly one of query (keywords) or hashtag; it has neither' });
    } else if (query !== undefined && hashtag !== undefined) {
      ctx.issues.push({ code: 'custom', input: hashtag, path: ['hashtag'], message: 'a search takes exactly one of query or hashtag, not both: make it two searches' });
    } else if (hashtag !== undefined && platform !== 'tiktok') {
      ctx.issues.push({
        code: 'custom',
        input: hashtag,
        path: ['hashtag'],
        message: `${platform} has no hashtag search (its reels-search takes a query): write query: ${JSON.stringify(hashtag.replace(/^#/, ''))} instead`,
      });
    }
  })
  .transform(({ platform, query, hashtag, max_results }): SearchTarget => {
    const target: SearchTarget = { platform, max_results };
    if (query !== undefined) target.query = query;
    if (hashtag !== undefined) target.hashtag = hashtag.replace(/^#/, '');
    return target;
  });

const commentSchema = mapping(
  {
    url: z.string({ error: 'expected the URL of a tiktok video or an instagram post or reel' }),
    platform: platformSchema.optional(),
    max_items: itemCount,
  },
  'a comments target: { url, max_items }',
).transform(({ url, platform, max_items }, ctx): CommentTarget => {
  const ref = PLATFORMS.map((candidate) => parseContentUrl(candidate, url)).find((found) => found !== undefined);
  if (!ref) {
    ctx.issues.push({
      code: 'custom',
      input: url,
      path: ['url'],
      message:
        'expected the URL of a tiktok video (https://www.tiktok.com/@handle/video/ID) or an instagram post or reel (https://www.instagram.com/p/CODE/ or https://www.instagram.com/reel/CODE/)',
    });
    return z.NEVER;
  }
  if (platform !== undefined && platform !== ref.platform) {
    ctx.issues.push({ code: 'custom', input: platform, path: ['platform'], message: `the url is a ${ref.platform} URL: drop platform (it is taken from the url) or fix it` });
    return z.NEVER;
  }
  return { url, platform: ref.platform, max_items };
});

const enrichCommentsSchema = z
  .union([z.boolean(), mapping({ max_per_item: itemCount }, 'false, true or { max_per_item: N }')], {
    error: `expected false, true (${DEFAULT_COMMENTS_PER_ITEM} per item) or { max_per_item: N }`,
  })
  .transform((value): Enrichment['comments'] => (value === true ? { max_per_item: DEFAULT_COMMENTS_PER_ITEM } : value));

const flag = z.boolean({ error: 'expected true or false' }).default(false);

const trackItemsSchema = mapping(
  { days: wholeNumber(1, MAX_TRACKED_DAYS, ` of days: items posted within them are observed again (the last planned observation is at ${MAX_TRACKED_DAYS} days of age)`) },
  'tracked items: { days: N }',
);

const trackSchema = mapping(
  { accounts: flag, items: z.preprocess(nullAsMissing, trackItemsSchema.optional()) },
  "tracking: { accounts: true, items: { days: N } } (each channel's profile once per run; the stats of items posted within N days, as they age)",
);

const noEnrichment = (): Enrichment => ({ stats: false, comments: false, transcript: false, summary: false, download: false });

const enrichSchema = mapping(
  {
    stats: flag,
    comments: z.preprocess(nullAsMissing, enrichCommentsSchema.default(false)),
    transcript: flag,
    summary: flag,
    download: flag,
  },
  'a mapping of stats, comments, transcript, summary, download',
);

const concurrencySchema = mapping(
  {
    targets: z.preprocess(nullAsMissing, wholeNumber(1, MAX_CONCURRENCY, ' of targets listed at once').default(DEFAULT_CONCURRENCY.targets)),
    calls: z.preprocess(nullAsMissing, wholeNumber(1, MAX_CONCURRENCY, ' of enrichment calls in flight').default(DEFAULT_CONCURRENCY.calls)),
  },
  'a mapping of targets and calls: { targets: 8, calls: 16 }',
);

const schemaContractValue = z.enum(SCHEMA_CONTRACTS, { error: `expected a schema contract: ${SCHEMA_CONTRACTS.join(', ')}` });
/** The resources a contract may name: the API's endpoints, by name (either platform's). */
const RESOURCE_NAMES = [...new Set(ENDPOINTS.map((spec) => spec.name))];

/** `schema_contract: freeze`, or by resource: `{ default: evolve, stats: freeze }` (src/harvest/schema-contract.ts). */
const schemaContractSchema = z
  .union([
    // A string first: so a mapping given is told about its members, not that it is no contract (config-problems.ts picks the branch).
    z.string().pipe(schemaContractValue),
    mapping(
      { default: schemaContractValue.optional(), ...Object.fromEntries(RESOURCE_NAMES.map((name) => [name, schemaContractValue.optional()])) },
      `a schema contract by resource: { default: evolve, stats: freeze }, the resources being ${RESOURCE_NAMES.join(', ')}`,
    ),
  ], { error: `expected a schema contract (${SCHEMA_CONTRACTS.join(', ')}), or a mapping of them by resource: { default: evolve, stats: freeze }` })
  .transform((value): HarvestSchemaContract => {
    if (typeof value === 'string') return { default: value };
    const { default: all, ...resources } = value as Record<string, SchemaContract | undefined>;
    const named = Object.entries(resources).filter((entry): entry is [EndpointName, SchemaContract] => entry[1] !== undefined);
    return { default: all ?? 'evolve', ...(named.length > 0 ? { resources: Object.fromEntries(named) } : {}) };
  });

/** Five fields of digits, names and * , - / ? (a basic check; the scheduler has the last word). */
const CRON_FIELD = /^[0-9A-Za-z*,/?-]+$/;

/** An IANA time zone, written as the scheduler's time zone database writes it. */
const timeZoneSchema = z.string({ error: 'expected an IANA time zone such as UTC or Europe/Berlin' }).check((ctx) => {
      const canonical = ianaZone(ctx.value);
      if (canonical === undefined) {
        ctx.issues.push({ code: 'custom', input: ctx.value, message: 'expected an IANA time zone such as UTC or Europe/Berlin' });
      } else if (canonical !== ctx.value && canonical.toLowerCase() === ctx.value.toLowerCase()) {
        // Intl ignores case, the scheduler's time zone database does not.
        ctx.issues.push({ code: 'custom', input: ctx.value, message: `write the time zone as ${JSON.stringify(canonical)}` });
      }
    });

const scheduleSchema = mapping(
  {
    cron: z
      .string({ error: 'expected a cron expression in quotes, e.g. "0 6 * * *"' })
      .refine((cron) => {
        const fields = cron.trim().split(/\s+/);
        return fields.length === 5 && fields.every((field) => CRON_FIELD.test(field));
      }, { error: 'expected a cron expression of 5 fields (minute hour day-of-month month day-of-week), e.g. "0 6 * * *"' }),
    timezone: timeZoneSchema,
  },
  'a schedule: { cron, timezone }',
);

function ianaZone(timeZone: string): string | undefined {
  try {
    return new Intl.DateTimeFormat(undefined, { timeZone }).resolvedOptions().timeZone;
  } catch {
    return undefined;
  }
}

function targetList<Item extends z.ZodType>(item: Item, what: string) {
  return z.preprocess(nullAsMissing, z.array(item, { error: `expected a list of ${what}` }).default(() => []));
}

const harvestSchema = mapping(
  {
    name: z
      .string({ error: 'expected a name of lowercase letters, digits and -' })
      .regex(NAME_PATTERN, { error: 'expected a name of lowercase letters, digits and - (starting with a letter or digit), e.g. creators-daily' }),
    schedule: z.preprocess(nullAsMissing, scheduleSchema.optional()),
    budget: mapping(
      { credits: wholeNumber(1, Number.MAX_SAFE_INTEGER, ' of credits (the hard cap one run may spend)') },
      'a budget: { credits: N }, the hard cap of credits one run may spend',
    ),
    channels: targetList(channelSchema, 'channels { platform, handle, content, max_items }'),
    searches: targetList(searchSchema, 'searches { platform, query or hashtag, max_results }'),
    comments: targetList(commentSchema, 'comments targets { url, max_items }'),
    enrich: z.preprocess(nullAsMissing, enrichSchema.default(noEnrichment)),
    job_threshold: z.preprocess(
      nullAsMissing,
      wholeNumber(MIN_JOB_THRESHOLD, Number.MAX_SAFE_INTEGER, ` (a limit above ${PAGE_LIMITS.maxSynchronous} always makes an async job)`).default(DEFAULT_JOB_THRESHOLD),
    ),
    concurrency: z.preprocess(nullAsMissing, concurrencySchema.default(() => ({ ...DEFAULT_CONCURRENCY }))),
    call_deadline_seconds: z.preprocess(nullAsMissing, wholeNumber(1, 3_600, ' of seconds one billed call may take, its retries included').default(DEFAULT_CALL_DEADLINE_SECONDS)),
    track: z.preprocess(nullAsMissing, trackSchema.optional()),
    schema_contract: z.preprocess(nullAsMissing, schemaContractSchema.optional()),
  },
  'a harvest: { name, budget, channels, searches, comments, ... }',
).check((ctx) => {
  const harvest = ctx.value;
  if (harvest.channels.length + harvest.searches.length + harvest.comments.length === 0) {
    ctx.issues.push({ code: 'custom', input: harvest, message: 'a harvest needs at least one target: give channels, searches or comments' });
  }
  // Two entries that name the same target would share its landings and checkpoint.
  const paths = [
    ...harvest.channels.map((_, index) => ['channels', index] as const),
    ...harvest.searches.map((_, index) => ['searches', index] as const),
    ...harvest.comments.map((_, index) => ['comments', index] as const),
  ];
  const seen = new Map<string, string>();
  planTargets(harvest as Harvest).forEach((target, index) => {
    const path = paths[index]!;
    const first = seen.get(target.key);
    if (first === undefined) seen.set(target.key, `${path[0]}[${path[1]}]`);
    else ctx.issues.push({ code: 'custom', input: target.key, path: [...path], message: `${first} names the same target (${target.key}): give each target once` });
  });
});

const HARVESTS_OF_BUDGET = 'expected a list of harvest names, or all (every harvest of the API key)';

/** A budget across runs: `{ name, credits, per: month, timezone, harvests }` (src/harvest/budgets.ts). */
const crossRunBudgetSchema = mapping(
  {
    name: z
      .string({ error: 'expected a budget name of lowercase letters, digits and -' })
      .regex(NAME_PATTERN, { error: 'expected a budget name of lowercase letters, digits and - (starting with a letter or digit), e.g. research' }),
    credits: wholeNumber(1, Number.MAX_SAFE_INTEGER, ' of credits (the most the runs it covers may spend together in a month)'),
    per: z.enum(['month'], { error: 'expected per: month (a budget is a cap per calendar month)' }),
    timezone: z.preprocess((value) => (value === null || value === undefined ? 'UTC' : value), timeZoneSchema),
    harvests: z.union([
      z.literal('all', { error: HARVESTS_OF_BUDGET }),
      z.array(z.string({ error: 'expected a harvest name' }), { error: HARVESTS_OF_BUDGET }).min(1, { error: 'expected at least one harvest name, or all' }),
    ], { error: HARVESTS_OF_BUDGET }),
  },
  'a budget: { name, credits, per: month, timezone, harvests: [names] or all }',
);

/** Budget names unique, and every harvest a budget names in the file. */
function checkBudgets(ctx: z.core.ParsePayload<{ harvests: { name: string }[]; budgets: { name: string; harvests: string[] | 'all' }[] }>): void {
  const names = new Set(ctx.value.harvests.map((harvest) => harvest.name));
  const seen = new Map<string, number>();
  ctx.value.budgets.forEach((budget, index) => {
    const first = seen.get(budget.name);
    if (first === undefined) seen.set(budget.name, index);
    else ctx.issues.push({ code: 'custom', input: budget.name, path: ['budgets', index, 'name'], message: `budget names must be unique: budgets[${first}] has this name too` });
    if (budget.harvests === 'all') return;
    budget.harvests.forEach((harvest, at) => {
      if (!names.has(harvest)) ctx.issues.push({ code: 'custom', input: harvest, path: ['budgets', index, 'harvests', at], message: `no harvest named ${JSON.stringify(harvest)}; the file has: ${[...names].join(', ')}` });
    });
  });
}

export const configSchema = mapping(
  {
    harvests: z
      .array(harvestSchema, { error: 'expected a list of harvests' })
      .min(1, { error: 'expected at least one harvest' })
      .check((ctx) => {
        const seen = new Map<string, number>();
        ctx.value.forEach((harvest, index) => {
          const first = seen.get(harvest.name);
          if (first === undefined) seen.set(harvest.name, index);
          else ctx.issues.push({ code: 'custom', input: harvest.name, path: [index, 'name'], message: `harvest names must be unique: harvests[${first}] has this name too` });
        });
      }),
    budgets: z.preprocess(nullAsMissing, z.array(crossRunBudgetSchema, { error: 'expected a list of budgets { name, credits, per, timezone, harvests }' }).default(() => [])),
  },
  DOCUMENT_HINT,
).check(checkBudgets);

/** The allowed key a typo most likely meant: within two edits, or a prefix either way. */
function closest(key: string, allowed: readonly string[]): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const name of allowed) {
    const prefix = key.length >= 3 && (name.startsWith(key) || key.startsWith(name));
    const distance = prefix ? 1 : editDistance(key.toLowerCase(), name);
    if (distance <= 2 && (!best || distance < best.distance)) best = { name, distance };
  }
  return best?.name;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min((previous[j] as number) + 1, (current[j - 1] as number) + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length] as number;
}
