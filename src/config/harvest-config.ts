import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LineCounter, parseDocument } from 'yaml';
import type { Harvest, HarvestConfig } from '../harvest/harvest-types.js';
import { budgetsCovering, type CrossRunBudget } from '../harvest/budgets.js';
import { byReadingOrder, dedupe, placeMissingAfterUnknownKeys, problemsOf, type Problem } from './config-problems.js';
import { ConfigError } from './config-error.js';
import { configSchema, DOCUMENT_HINT } from './harvest-schema.js';
import { CONFIG_DIR } from '../project-paths.js';
import { formatPath, Reader, SourceMap, yamlErrorText } from './yaml-positions.js';

/**
 * The harvest config loader: YAML read with positions (yaml-positions.ts), `${VAR}` taken from the
 * environment, then checked with zod (harvest-schema.ts). Every error is a ConfigError naming the
 * file, the line and the path of the offending value (`harvests[0].channels[1].handle`), the value,
 * and what is expected (config-problems.ts); all of them at once.
 */

export const DEFAULT_HARVESTS_FILE = join(CONFIG_DIR, 'harvests.yaml');

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
  // Each harvest carries the budgets across runs that cover it, to its runs (and its schedule's).
  const budgets = checked.data.budgets as CrossRunBudget[];
  const harvests = checked.data.harvests.map((harvest) => {
    const covering = budgetsCovering(budgets, harvest.name);
    return covering.length > 0 ? { ...harvest, budgets: covering } : harvest;
  });
  return { file, harvests, ...(budgets.length > 0 ? { budgets } : {}) };
}

/** The harvest of that name, or a ConfigError listing the names there are. */
export function findHarvest(config: HarvestConfig, name: string): Harvest {
  const found = config.harvests.find((harvest) => harvest.name === name);
  if (found) return found;
  const known = config.harvests.map((harvest) => harvest.name).join(', ');
  throw new ConfigError(config.file, 'harvests', `no harvest named ${JSON.stringify(name)}; the file has: ${known || '(none)'}`);
}
