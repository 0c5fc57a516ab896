import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LineCounter, isAlias, isMap, isScalar, isSeq, parseDocument, type Document } from 'yaml';
import { z } from 'zod';
import { parseContentUrl } from '../api-catalog/content-urls.js';
import { PAGE_LIMITS, PLATFORMS, type Platform } from '../api-catalog/endpoints.js';
import { ConfigError } from './config-error.js';
import type { CommentTarget, Enrichment, Harvest, HarvestConfig, SearchTarget } from '../harvest/harvest-types.js';
import { CONFIG_DIR } from './project-paths.js';
import { DEFAULT_CONCURRENCY } from '../harvest/rules.js';
import { planTargets } from '../harvest/targets.js';

/**
 * The harvest config loader: YAML read with positions, `${VAR}` taken from the environment, then
 * checked with zod. Every error is a ConfigError naming the file, the line and the path of the
 * offending value (`harvests[0].channels[1].handle`), the value, and what is expected.
 *
 * Workflows must not import this module (it reads files); they use ./harvest-types.ts.
 */

export type * from '../harvest/harvest-types.js';

export const DEFAULT_HARVESTS_FILE = join(CONFIG_DIR, 'harvests.yaml');

export const MAX_TARGET_ITEMS = 100_000;
export const DEFAULT_JOB_THRESHOLD = 500;
/** A billed call's overall deadline, in seconds, retries included: a slow drip of bytes cannot hold a run past it. */
export const DEFAULT_CALL_DEADLINE_SECONDS = 120;
/** A limit above the synchronous page size always makes a job, so a lower threshold means nothing. */
export const MIN_JOB_THRESHOLD = PAGE_LIMITS.maxSynchronous + 1;
/** What `enrich: { comments: true }` means. */
export const DEFAULT_COMMENTS_PER_ITEM = 20;
/** More in flight than this only queues at the API's rate limit. */
export const MAX_CONCURRENCY = 256;

export function loadHarvestConfig(file: string, env: NodeJS.ProcessEnv = process.env): HarvestConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : code === 'EISDIR' ? 'it is a directory' : undefined;
    throw new ConfigError(file, '(file)', `cannot read the harvest config: ${reason ? `${reason} (${code})` : (code ?? (error as Error).message)}`);
  }
  return parseHarvestConfig(text, file, env);
}

export function parseHarvestConfig(text: string, file: string, env: NodeJS.ProcessEnv = process.env): HarvestConfig {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter });
  const syntaxError = doc.errors[0];
  if (syntaxError) {
    const where = syntaxError.linePos?.[0] ?? lineCounter.linePos(syntaxError.pos[0]);
    const sourceLine = text.split(/\r?\n/)[where.line - 1] ?? '';
    throw new ConfigError(file, '(document)', `not valid YAML: ${yamlErrorText(syntaxError.code, syntaxError.message, sourceLine)}`, where.line, where.col);
  }
  if (doc.contents === null) throw new ConfigError(file, '(document)', `the file is empty: expected ${DOCUMENT_HINT}`, 1, 1);

  const source = new SourceMap(lineCounter);
  const input = new Reader(doc, file, env, source).read(doc.contents, []);
  const checked = configSchema.safeParse(input);
  if (!checked.success) {
    const problems = placeMissingAfterUnknownKeys(dedupe(checked.error.issues.flatMap((issue) => problemsOf(issue, [], input, source))));
    problems.sort(byReadingOrder);
    // Every problem, in reading order, so one edit fixes them all instead of one per attempt.
    const asError = (problem: Problem, more: ConfigError[] = []) => new ConfigError(file, formatPath(problem.path), problem.message, problem.position.line, problem.position.col, more);
    const [first, ...rest] = problems;
    throw asError(first as Problem, rest.map((problem) => asError(problem)));
  }
  return { file, harvests: checked.data.harvests };
}

/** The harvest of that name, or a ConfigError listing the names there are. */
export function findHarvest(config: HarvestConfig, name: string): Harvest {
  const found = config.harvests.find((harvest) => harvest.name === name);
  if (found) return found;
  const known = config.harvests.map((harvest) => harvest.name).join(', ');
  throw new ConfigError(config.file, 'harvests', `no harvest named ${JSON.stringify(name)}; the file has: ${known || '(none)'}`);
}

// ---- reading YAML with positions ----------------------------------------------------------------

type PathSegment = string | number;
type Path = readonly PathSegment[];
interface Position {
  line: number;
  col: number;
}

/** `harvests[0].channels[1].handle`; `(document)` for the root. */
export function formatPath(path: Path): string {
  let text = '';
  for (const segment of path) {
    if (typeof segment === 'number') text += `[${segment}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_-]*$/.test(segment)) text += text === '' ? segment : `.${segment}`;
    else text += `[${JSON.stringify(segment)}]`;
  }
  return text === '' ? '(document)' : text;
}

/** Where each value (and each mapping key) of the document starts, by formatted path. */
class SourceMap {
  private readonly values = new Map<string, Position>();
  private readonly keys = new Map<string, Position>();
  constructor(private readonly lineCounter: LineCounter) {}

  record(kind: 'value' | 'key', path: Path, offset: number | undefined): void {
    if (offset === undefined) return;
    const map = kind === 'value' ? this.values : this.keys;
    const key = formatPath(path);
    if (!map.has(key)) map.set(key, this.lineCounter.linePos(offset));
  }

  /** The key's line for a mapping entry (where a reader looks), else the value's; else the nearest ancestor's. */
  positionOf(path: Path): Position {
    for (let length = path.length; length >= 0; length--) {
      const key = formatPath(path.slice(0, length));
      const found = this.keys.get(key) ?? this.values.get(key);
      if (found) return found;
    }
    return { line: 1, col: 1 };
  }
}

/** Guards against alias bombs: no sane harvest file has this many nodes. */
const MAX_NODES = 100_000;

class Reader {
  private nodes = 0;
  private readonly expanding = new Set<unknown>();

  constructor(
    private readonly doc: Document,
    private readonly file: string,
    private readonly env: NodeJS.ProcessEnv,
    private readonly source: SourceMap,
  ) {}

  /** The plain value of a node, `${VAR}` substituted in strings, with positions recorded by path. */
  read(node: unknown, path: Path): unknown {
    if (++this.nodes > MAX_NODES) this.fail(path, `more than ${MAX_NODES} values (an alias expanding too far?)`);
    if (node === null || node === undefined) return null;
    if (isAlias(node)) {
      const target = node.resolve(this.doc);
      if (target === undefined) this.fail(path, `alias *${node.source} refers to no anchor`);
      if (this.expanding.has(target)) this.fail(path, `alias *${node.source} contains itself`);
      this.expanding.add(target);
      try {
        this.source.record('value', path, node.range?.[0]);
        return this.read(target, path);
      } finally {
        this.expanding.delete(target);
      }
    }
    if (isScalar(node)) {
      this.source.record('value', path, node.range?.[0]);
      if (typeof node.value !== 'string') return node.value;
      const text = this.substitute(node.value, path);
      return node.type === 'PLAIN' && text !== node.value ? retype(text) : text;
    }
    if (isSeq(node)) {
      this.source.record('value', path, node.range?.[0]);
      return node.items.map((item, index) => this.read(item, [...path, index]));
    }
    if (isMap(node)) {
      this.source.record('value', path, node.range?.[0]);
      const result: Record<string, unknown> = {};
      for (const pair of node.items) {
        const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
        const childPath = [...path, key];
        const keyNode = pair.key as { range?: [number, number, number] } | null;
        this.source.record('key', childPath, keyNode?.range?.[0]);
        // defineProperty: a key named __proto__ must stay a plain key.
        Object.defineProperty(result, key, { value: this.read(pair.value, childPath), enumerable: true, writable: true, configurable: true });
      }
      return result;
    }
    return this.fail(path, 'unsupported YAML node');
  }

  /** `${VAR}` from the environment; `$${VAR}` is a literal `${VAR}`. */
  private substitute(text: string, path: Path): string {
    return text.replace(/\$(\$?)\{([^}]*)\}/g, (_match, escape: string, name: string) => {
      if (escape) return `\${${name}}`;
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
        this.fail(path, `\${${name}} is not a variable reference: write \${NAME} with NAME of letters, digits and _, or $\${...} for a literal \${...}`);
      }
      const value = this.env[name];
      if (value === undefined) {
        this.fail(path, `environment variable ${name} is not set (needed by \${${name}}); set it, or write $\${${name}} for a literal \${${name}}`);
      }
      return value;
    });
  }

  private fail(path: Path, message: string): never {
    const position = this.source.positionOf(path);
    throw new ConfigError(this.file, formatPath(path), message, position.line, position.col);
  }
}

/**
 * A plain (unquoted) scalar keeps YAML's typing after substitution, so `credits: ${BUDGET}` is a
 * number; quoted scalars stay strings.
 */
function retype(text: string): unknown {
  if (/^[-+]?(?:\d+|\d*\.\d+)(?:[eE][-+]?\d+)?$/.test(text)) return Number(text);
  if (text === 'true' || text === 'false') return text === 'true';
  return text;
}

function yamlErrorText(code: string, message: string, sourceLine: string): string {
  const text = message.replace(/ at line \d+, column \d+:[\s\S]*$/, '').trim();
  if (code === 'BAD_ALIAS' || code === 'BAD_SCALAR_START') {
    return `${text} (a value starting with *, &, @, \` or another YAML indicator must be quoted, e.g. cron: "* * * * *")`;
  }
  if (sourceLine.includes('${')) {
    return `${text} (inside { } or [ ], a \${VAR} value must be quoted; for a number from a variable, use block style: credits: \${VAR} on its own line)`;
  }
  return text;
}

// ---- the schema ---------------------------------------------------------------------------------

const DOCUMENT_HINT = 'a mapping with a `harvests` list';
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

/** Five fields of digits, names and * , - / ? (a basic check; the scheduler has the last word). */
const CRON_FIELD = /^[0-9A-Za-z*,/?-]+$/;

const scheduleSchema = mapping(
  {
    cron: z
      .string({ error: 'expected a cron expression in quotes, e.g. "0 6 * * *"' })
      .refine((cron) => {
        const fields = cron.trim().split(/\s+/);
        return fields.length === 5 && fields.every((field) => CRON_FIELD.test(field));
      }, { error: 'expected a cron expression of 5 fields (minute hour day-of-month month day-of-week), e.g. "0 6 * * *"' }),
    timezone: z.string({ error: 'expected an IANA time zone such as UTC or Europe/Berlin' }).check((ctx) => {
      const canonical = ianaZone(ctx.value);
      if (canonical === undefined) {
        ctx.issues.push({ code: 'custom', input: ctx.value, message: 'expected an IANA time zone such as UTC or Europe/Berlin' });
      } else if (canonical !== ctx.value && canonical.toLowerCase() === ctx.value.toLowerCase()) {
        // Intl ignores case, the scheduler's time zone database does not.
        ctx.issues.push({ code: 'custom', input: ctx.value, message: `write the time zone as ${JSON.stringify(canonical)}` });
      }
    }),
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

const configSchema = mapping(
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
  },
  DOCUMENT_HINT,
);

// ---- issues to problems -------------------------------------------------------------------------

interface Problem {
  path: Path;
  message: string;
  position: Position;
  /** The value is absent, so the position is its parent's. */
  missing: boolean;
  unknownKey?: boolean;
  /** Where to sort it, when not at its position. */
  sortPosition?: Position;
}

function problemsOf(issue: z.core.$ZodIssue, base: Path, input: unknown, source: SourceMap): Problem[] {
  const path = [...base, ...issue.path.map((segment) => (typeof segment === 'number' ? segment : String(segment)))];
  if (issue.code === 'invalid_union') {
    // A branch that got past the type check at the union's own path is what the writer meant.
    const meant = issue.errors.find((branch) => !branch.some((inner) => inner.code === 'invalid_type' && inner.path.length === 0));
    if (meant) return meant.flatMap((inner) => problemsOf(inner, path, input, source));
  }
  if (issue.code === 'unrecognized_keys') {
    const keyPath = [...path, issue.keys[0] ?? ''];
    return [{ path: keyPath, message: issue.message, position: source.positionOf(keyPath), missing: false, unknownKey: true }];
  }
  const found = valueAt(input, path);
  const message = !found.present ? `missing: ${issue.message}` : isScalarValue(found.value) ? `${issue.message}, got ${show(found.value)}` : issue.message;
  return [{ path, message, position: source.positionOf(path), missing: !found.present }];
}

/**
 * Problems in reading order, except that a missing key comes after the unknown keys of the same
 * mapping: a typo (`max_item`) explains the missing key (`max_items`), so it is reported first.
 */
function byReadingOrder(a: Problem, b: Problem): number {
  const pa = a.sortPosition ?? a.position;
  const pb = b.sortPosition ?? b.position;
  return pa.line - pb.line || Number(a.missing) - Number(b.missing) || pa.col - pb.col;
}

function placeMissingAfterUnknownKeys(problems: Problem[]): Problem[] {
  for (const problem of problems) {
    if (!problem.missing) continue;
    const parent = formatPath(problem.path.slice(0, -1));
    for (const other of problems) {
      if (!other.unknownKey || formatPath(other.path.slice(0, -1)) !== parent) continue;
      const current = problem.sortPosition ?? problem.position;
      if (other.position.line > current.line || (other.position.line === current.line && other.position.col > current.col)) problem.sortPosition = other.position;
    }
  }
  return problems;
}

function valueAt(input: unknown, path: Path): { present: boolean; value?: unknown } {
  let value = input;
  for (const segment of path) {
    if (typeof value !== 'object' || value === null || !Object.prototype.hasOwnProperty.call(value, segment)) return { present: false };
    value = (value as Record<PathSegment, unknown>)[segment];
  }
  return { present: true, value };
}

function isScalarValue(value: unknown): boolean {
  return value === null || (typeof value !== 'object' && typeof value !== 'function');
}

function show(value: unknown): string {
  const text = typeof value === 'string' ? JSON.stringify(value) : String(value);
  return text.length > 120 ? `${text.slice(0, 117)}...` : text;
}

function dedupe(problems: Problem[]): Problem[] {
  const seen = new Set<string>();
  return problems.filter((problem) => {
    const key = `${formatPath(problem.path)}\n${problem.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

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
