/**
 * src/store/layout.ts says every path under the data directory, and every key, is named there and
 * only there. This test holds it to that: it reads every production file (src/, activities/,
 * workflows/) with the TypeScript parser and fails on code that builds a data-directory path or
 * a key anywhere else:
 *   - a path joined (join/resolve, a template with `/`) from a data-directory folder's or file's own
 *     name ('segments', 'landing', 'journal', 'lake', 'distributed', `.jsonl`, `.reason`, …);
 *   - a path joined onto the data directory itself (`join(dataDir, …)`), or onto a path one of
 *     layout's builders returned (`join(quarantineRoot(dataDir), runFolder)`,
 *     `${landingRoot(dataDir)}/${runFolder}`);
 *   - a key or object key turned from a path by hand (`relative(root, file).split(sep).join('/')`);
 *   - a key built from its prefixes (`item:…`, `comments:…`, `job:…`) outside layout.ts, and outside
 *     src/harvest/targets.ts for target keys (the pure domain names them, and cannot import layout).
 * It is a test, not an ESLint rule, because it needs layout.ts's own exports to know its builders.
 * The parser sees code only: comments and docs may name paths freely.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/project-paths.js';

const LAYOUT = 'src/store/layout.ts';
const TARGETS = 'src/harvest/targets.ts';
/** Rooms that never touch the data directory: the API client, its catalog and the emulator (whose `/jobs/…` are URLs). */
const NOT_SCANNED = ['src/api/', 'src/api-catalog/', 'src/emulator/'];

/** Names of the data directory's folders and files, as layout.ts names them. */
const DATA_NAMES = [
  'segments', 'landing', 'quarantine', 'journal', 'journal-late', 'coverage', 'jobs', 'by-run', 'state', 'webhooks', 'media', 'lake',
  '.loader', 'logs', 'distributed', 'machines', 'postgres', 'minio', 'credentials.json', 'ports.json', 'env.sh', 'temporal.sqlite',
  'temporal.server.json', 'warehouse.duckdb', 'catalog.sqlite', 'secrets.json', 'journal.jsonl', 'store-id.json', 'credits-low.json',
];
/** Endings and marks of the data directory's files. */
const DATA_SUFFIXES = ['.jsonl', '.ndjson', '.seg', '.reason', '.owner', '.ended', '.archiving', '.run'];
/** Prefixes of keys: target keys (targets.ts) and the journal's keys of job starts (layout.ts). */
const KEY_PREFIXES = ['item', 'comments', 'job', 'channel', 'search'];

/**
 * Files of programs the harvester runs, in the folders layout.ts gives them: theirs to name, not ours
 * (PostgreSQL's data folder holds PG_VERSION and postmaster.pid).
 */
const FOREIGN_FILES = new Set(['PG_VERSION', 'postmaster.pid']);

/** Folders of the project itself (src/project-paths.ts), under which the data directory's names mean other things. */
const PROJECT_FOLDERS = ['TOOLS_DIR', 'PROJECT_ROOT'];

export interface Finding {
  file: string;
  line: number;
  why: string;
  code: string;
}

/** layout.ts's exported functions: its builders of paths and keys. */
function layoutBuilders(): Set<string> {
  const source = ts.createSourceFile(LAYOUT, readFileSync(join(PROJECT_ROOT, LAYOUT), 'utf8'), ts.ScriptTarget.Latest, true);
  const names = new Set<string>();
  for (const statement of source.statements) {
    const exported = ts.getModifiers(statement as ts.HasModifiers)?.some((modifier) => modifier.kind === ts.SyntaxKind.ExportKeyword);
    if (exported && ts.isFunctionDeclaration(statement) && statement.name) names.add(statement.name.text);
  }
  return names;
}

const BUILDERS = layoutBuilders();

const PATH_PART = new RegExp(`(^|/)(${DATA_NAMES.map((name) => name.replace(/[.]/g, '\\.')).join('|')})(/|$)`);
const ENDS_WITH_SUFFIX = new RegExp(`(${DATA_SUFFIXES.map((suffix) => suffix.replace(/[.]/g, '\\.')).join('|')})$`);
const KEY_START = new RegExp(`^(${KEY_PREFIXES.join('|')}):`);
/** A key prefix inside SQL text: `'comments:' || …`. */
const SQL_KEY = new RegExp(`'(${KEY_PREFIXES.join('|')}):'`);

function calleeName(call: ts.CallExpression): string | undefined {
  const callee = call.expression;
  if (ts.isIdentifier(callee)) return callee.text;
  if (ts.isPropertyAccessExpression(callee)) return callee.name.text;
  return undefined;
}

function isLayoutCall(node: ts.Node): boolean {
  if (ts.isAwaitExpression(node)) return isLayoutCall(node.expression);
  if (ts.isPropertyAccessExpression(node)) return isLayoutCall(node.expression);
  return ts.isCallExpression(node) && BUILDERS.has(calleeName(node) ?? '');
}

/** The data directory by name: `dataDir`, `options.dataDir`, `this.dataDir`. */
function isDataDir(node: ts.Node): boolean {
  if (ts.isIdentifier(node)) return node.text === 'dataDir';
  return ts.isPropertyAccessExpression(node) && node.name.text === 'dataDir';
}

/** The static text parts of a string or template literal. */
function textParts(node: ts.Node): string[] {
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return [node.text];
  if (ts.isTemplateExpression(node)) return [node.head.text, ...node.templateSpans.map((span) => span.literal.text)];
  return [];
}

/**
 * Why a literal's text names a data-directory path, if it does. Text with whitespace is prose (a
 * message, a command's help), never a path; text of a URL (`${endpoint}/minio/health/live`) is not one either.
 */
function namesDataPath(text: string, inJoin: boolean): string | undefined {
  if (FOREIGN_FILES.has(text) || /\s/.test(text)) return undefined;
  if (inJoin && (DATA_NAMES.includes(text) || ENDS_WITH_SUFFIX.test(text))) return `joins the data directory's name ${JSON.stringify(text)}`;
  if (text.includes('/') && PATH_PART.test(text)) return `builds a path with the data directory's folder in ${JSON.stringify(text)}`;
  return undefined;
}

/** A template literal that builds an HTTP URL: its text holds `http://` or `https://`, or it begins with an endpoint's or a URL's value. (An `s3://` URL is the store's: its keys keep the data directory's layout.) */
function isUrlTemplate(node: ts.TemplateExpression): boolean {
  return textParts(node).some((text) => /https?:\/\//.test(text)) || (node.head.text === '' && /url|endpoint/i.test(node.templateSpans[0]!.expression.getText()));
}

/** Why a node builds a path or a key outside layout.ts, if it does. */
function offence(node: ts.Node, file: string): string | undefined {
  if (ts.isCallExpression(node) && ['join', 'resolve'].includes(calleeName(node) ?? '') && node.arguments.length > 1) {
    const [first, ...rest] = node.arguments;
    // The project's own folders (its tools, its sources), not the data directory.
    if (ts.isIdentifier(first!) && PROJECT_FOLDERS.includes(first.text)) return undefined;
    if (rest.every((argument) => ts.isStringLiteral(argument) && FOREIGN_FILES.has(argument.text))) return undefined;
    if (isDataDir(first!)) return 'joins a path onto the data directory';
    if (isLayoutCall(first!)) return 'joins onto a path layout.ts built';
    for (const argument of rest) {
      for (const text of textParts(argument)) {
        const why = namesDataPath(text, true);
        if (why) return why;
      }
    }
  }
  if (ts.isTemplateExpression(node)) {
    if (isUrlTemplate(node)) return undefined;
    for (const [index, span] of node.templateSpans.entries()) {
      const before = index === 0 ? node.head.text : node.templateSpans[index - 1]!.literal.text;
      if (isLayoutCall(span.expression) && (span.literal.text.startsWith('/') || before.endsWith('/'))) return 'extends a path or object key layout.ts built';
      // `${file}.reason`, `${shape}.jsonl`: a data file named by its ending.
      if (DATA_SUFFIXES.some((suffix) => span.literal.text === suffix || span.literal.text.startsWith(`${suffix}/`))) return `names a data file by its ending ${JSON.stringify(span.literal.text)}`;
    }
  }
  if (ts.isCallExpression(node) && calleeName(node) === 'join' && ts.isPropertyAccessExpression(node.expression)) {
    const split = node.expression.expression;
    if (ts.isCallExpression(split) && calleeName(split) === 'split' && split.arguments[0] && ts.isIdentifier(split.arguments[0]) && split.arguments[0].text === 'sep') {
      return "turns a path into a key by hand (layout.ts's keyOfFile does)";
    }
  }
  for (const text of textParts(node)) {
    const why = namesDataPath(text, false);
    if (why) return why;
    if (file !== TARGETS && (KEY_START.test(text) || SQL_KEY.test(text)) && (ts.isTemplateExpression(node) || SQL_KEY.test(text) || ts.isBinaryExpression(node.parent))) {
      return `builds a key from its prefix in ${JSON.stringify(text)}`;
    }
  }
  return undefined;
}

/** What in `source` (a production file at `file`, relative to the project) builds a path or a key outside layout.ts. */
export function layoutFindings(file: string, source: string): Finding[] {
  if (file === LAYOUT) return [];
  const parsed = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true);
  const findings: Finding[] = [];
  const visit = (node: ts.Node) => {
    // A type says what a value may be, and an import where a module is: neither builds a path.
    if (ts.isTypeNode(node) || ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) return;
    const why = offence(node, file);
    if (why) {
      const { line } = parsed.getLineAndCharacterOfPosition(node.getStart(parsed));
      findings.push({ file, line: line + 1, why, code: node.getText(parsed).slice(0, 120) });
      return;
    }
    ts.forEachChild(node, visit);
  };
  visit(parsed);
  return findings;
}

function productionFiles(): string[] {
  const files: string[] = [];
  const walk = (folder: string) => {
    for (const entry of readdirSync(join(PROJECT_ROOT, folder), { withFileTypes: true })) {
      const path = `${folder}/${entry.name}`;
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts') && !NOT_SCANNED.some((room) => path.startsWith(room))) files.push(path);
    }
  };
  for (const folder of ['src', 'activities', 'workflows']) walk(folder);
  return files.sort();
}

/** Code as it was written outside layout.ts before it named every path and key: each must be found. */
const OFFENDERS: Array<[file: string, source: string]> = [
  ['activities/item-enricher.ts', 'const key = pageLandingKey(runId, `item:${platform}:${endpoint}:${url}`, 1);'],
  ['activities/item-enricher.ts', 'const target = `comments:${platform}:${url}`;'],
  ['activities/jobs.ts', 'const key = `job:${input.target.key}`;'],
  ['src/harvest/plan-history-probe.ts', "const sql = `a.target = 'comments:' || i.platform || ':' || i.url`;"],
  ['src/cli/stack.ts', "const folder = join(dataDir, 'distributed');"],
  ['src/cli/stack.ts', "const folder = join(options.dataDir, 'machines', `worker-${index + 1}`);"],
  ['src/cli/shared-services.ts', "startPostgres(join(folder, 'postgres'));"],
  ['src/store/shared/shared-segments.ts', 'const size = await stat(join(this.dataDir, object.key));'],
  ['src/store/shared/shared-segments.ts', 'const prefix = `${objectKey(this.dataDir, runSegmentFolder(this.dataDir, runFolder))}/`;'],
  ['src/store/answer-segments.ts', 'await rm(`${landingRoot(dataDir)}/${runFolder}`, { recursive: true, force: true });'],
  ['src/store/landing.ts', 'const writer = new SegmentWriter(`${runSegmentFolder(this.dataDir, runFolder)}/${newSegmentFileName()}`);'],
  ['src/store/landing.ts', "const key = relative(root, path).split(sep).join('/');"],
  ['src/warehouse/extract.ts', 'const file = join(folder, `${shape}.jsonl`);'],
  ['src/warehouse/extract.ts', 'const files = filesUnder(join(quarantineRoot(dataDir), runFolder));'],
  ['src/warehouse/journal-archive.ts', "const file = join(folder, 'records.jsonl');"],
  ['src/warehouse/lake.ts', "const dataPath = `s3://${bucket}/${prefix}lake/data/`;"],
  ['src/store/file-journal.ts', "writeDurableFile(`${this.file}.owner`, String(attempt), { what: 'journal claim' });"],
  ['src/store/quarantine.ts', "writeDurableFile(`${target}.reason`, reason, { what: 'quarantine reason' });"],
  ['src/store/file-journal.ts', "const ENDED = join(folder, '.ended');"],
];

/** Code that names nothing of the data directory, or names it through layout.ts: none may be found. */
const INNOCENT: Array<[file: string, source: string]> = [
  ['src/store/landing.ts', 'const writer = new SegmentWriter(runSegmentFile(this.dataDir, runFolder, newSegmentFileName()));'],
  ['src/cli/stack.ts', 'const log = join(TOOLS_DIR, "certs", "ca.pem");'],
  ['src/warehouse/query.ts', 'const sql = `SELECT count(*) FROM lake.${table} WHERE endpoint = ${sqlString(`${platform}/comments`)}`;'],
  ['src/cli/shared-services.ts', "const pid = readFileSync(join(serviceDataFolder(folder), 'postmaster.pid'), 'utf8');"],
  ['src/harvest/targets.ts', 'const key = `comments:${platform}:${url}`;'],
  ['src/store/probe.ts', '/** Lands under `segments/<run>/` and `landing/<run>/…`, as `job:` keys. */ export const probe = 1;'],
  ['src/cli/shared-services.ts', "const binary = join(TOOLS_DIR, 'bin', 'minio');"],
  ['src/cli/shared-services.ts', 'const live = await fetch(`${endpoint}/minio/health/live`);'],
  ['src/cli/commands/probe.ts', "const help = 'Answers a load set aside in <data>/quarantine/ are put back to be loaded';"],
  ['src/store/probe.ts', 'const name = `${sha256}.json`;'],
];

describe('every path under the data directory, and every key, is built in src/store/layout.ts', () => {
  it('finds a path or a key built outside layout.ts', () => {
    const missed = OFFENDERS.filter(([file, source]) => layoutFindings(file, source).length === 0);
    expect(missed).toEqual([]);
  });

  it('finds nothing in code that builds none, or builds them through layout.ts', () => {
    expect(INNOCENT.flatMap(([file, source]) => layoutFindings(file, source))).toEqual([]);
  });

  it('no production file builds one', () => {
    const findings = productionFiles().flatMap((file) => layoutFindings(file, readFileSync(join(PROJECT_ROOT, file), 'utf8')));
    expect(findings.map((finding) => `${finding.file}:${finding.line}: ${finding.why}: ${finding.code}`)).toEqual([]);
  });

  it('knows layout.ts by its builders', () => {
    for (const builder of ['pageLandingKey', 'runSegmentFolder', 'landingRoot', 'objectKey', 'distributedFiles', 'keyOfFile']) expect(BUILDERS).toContain(builder);
  });
});
