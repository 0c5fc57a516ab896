#!/usr/bin/env node
/**
 * Lists the production files (src/, workflows/, activities/) over MAX_FILE_LINES lines and the
 * functions in them over MAX_FUNCTION_LINES lines, as the TypeScript compiler parses them (a
 * function's lines run from its first token to its closing brace; a function inside another
 * counts in both). Exits 1 when any is over outside the lists below.
 *
 * Two lists say what is left out, each entry with its reason:
 * - DECLARATIVE: tables written as data (a catalog, a schema, a document built field by field),
 *   which are long because the thing they describe is, not because logic piled up;
 * - OWNED_ELSEWHERE: files other work is changing now; they are reported, not failed, until that
 *   work lands and this list is emptied.
 *
 *   node scripts/size-limits.mjs          # the report; exit 1 on a breach outside the lists
 *   node scripts/size-limits.mjs --json   # the same as JSON: { breaches, exempt }
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

export const MAX_FILE_LINES = 450;
export const MAX_FUNCTION_LINES = 80;

const ROOT = join(import.meta.dirname, '..');
const PRODUCTION_FOLDERS = ['src', 'workflows', 'activities'];

/** Files, or functions (`file#name`), that are declarative tables: over the limits by nature. */
export const DECLARATIVE = {};

/**
 * Files other engineers are changing now: reported only, until that work lands (empty: every file is held to the limits).
 * A path ending in `/` holds a folder; one ending in `*` any file that starts so.
 */
export const OWNED_ELSEWHERE = [];

function ownedElsewhere(file) {
  return OWNED_ELSEWHERE.some((entry) => (entry.endsWith('/') || entry.endsWith('*') ? file.startsWith(entry.replace(/\*$/, '')) : file === entry));
}

function productionFiles(folder) {
  return readdirSync(join(ROOT, folder), { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts'))
    .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)).split('\\').join('/'))
    .sort();
}

/** What a function is called where it is written: its own name, its variable's, its property's, or where it is. */
function functionName(node, source) {
  const named = node.name ?? (ts.isVariableDeclaration(node.parent) || ts.isPropertyAssignment(node.parent) || ts.isPropertyDeclaration(node.parent) ? node.parent.name : undefined);
  const name = named ? named.getText(source) : ts.isConstructorDeclaration(node) ? 'constructor' : `(function at line ${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1})`;
  const owner = ts.isClassLike(node.parent) && node.parent.name ? `${node.parent.name.text}.` : '';
  return `${owner}${name}`;
}

/** Every function in a file with its length in lines. */
function functionsOf(file) {
  const source = ts.createSourceFile(file, readFileSync(join(ROOT, file), 'utf8'), ts.ScriptTarget.Latest, true);
  const found = [];
  const visit = (node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      found.push({ name: functionName(node, source), line: first + 1, lines: last - first + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Each file or function over its limit: `{ file, function?, line?, lines, limit, exempt? }`. */
export function sizeBreaches() {
  const breaches = [];
  for (const file of PRODUCTION_FOLDERS.flatMap(productionFiles)) {
    const lines = readFileSync(join(ROOT, file), 'utf8').split('\n').length - 1;
    const exempt = (key) => DECLARATIVE[key] ?? (ownedElsewhere(file) ? 'owned elsewhere for now' : undefined);
    if (lines > MAX_FILE_LINES) breaches.push({ file, lines, limit: MAX_FILE_LINES, exempt: exempt(file) });
    for (const fn of functionsOf(file)) {
      if (fn.lines > MAX_FUNCTION_LINES) breaches.push({ file, function: fn.name, line: fn.line, lines: fn.lines, limit: MAX_FUNCTION_LINES, exempt: exempt(`${file}#${fn.name}`) });
    }
  }
  return breaches;
}

function describe(breach) {
  const where = breach.function ? `${breach.file}:${breach.line} ${breach.function}` : breach.file;
  return `${where}: ${breach.lines} lines (limit ${breach.limit})${breach.exempt ? `, exempt: ${breach.exempt}` : ''}`;
}

if (process.argv[1] === import.meta.filename) {
  const all = sizeBreaches();
  const breaches = all.filter((breach) => !breach.exempt);
  const exempt = all.filter((breach) => breach.exempt);
  if (process.argv.includes('--json')) process.stdout.write(`${JSON.stringify({ breaches, exempt }, null, 2)}\n`);
  else {
    for (const breach of [...breaches, ...exempt]) process.stdout.write(`${describe(breach)}\n`);
    process.stdout.write(`${breaches.length} over the limits, ${exempt.length} exempt\n`);
  }
  process.exit(breaches.length > 0 ? 1 : 0);
}
