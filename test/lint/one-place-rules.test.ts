/**
 * Rules that each live in one place, checked by reading the source (issue 42): the run's spent
 * credits change only in src/harvest/run-state.ts, a run's stop is set only there (stopRun), a
 * run's budget is reserved and settled in workflows/ only by the bracket, and the only work frame
 * is activities/work-frame.ts (the checkpoint heartbeat and the call journals of activities are
 * made there).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/project-paths.js';

function sourceFiles(folder: string): string[] {
  return readdirSync(join(PROJECT_ROOT, folder), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.ts'))
    .map((name) => join(folder, name));
}

/** `file:line` of each line of the files under `folders` that matches `pattern`, but for the files `allowed`. */
function linesMatching(folders: string[], pattern: RegExp, allowed: string[]): string[] {
  const found: string[] = [];
  for (const file of folders.flatMap(sourceFiles)) {
    if (allowed.includes(file)) continue;
    readFileSync(join(PROJECT_ROOT, file), 'utf8')
      .split('\n')
      .forEach((line, index) => {
        if (pattern.test(line)) found.push(`${relative('.', file)}:${index + 1}: ${line.trim()}`);
      });
  }
  return found;
}

const PRODUCTION = ['src', 'workflows', 'activities'];

it('the run\'s spent credits are read and changed only in src/harvest/run-state.ts', () => {
  expect(linesMatching(PRODUCTION, /state\.budget\.spent/, ['src/harvest/run-state.ts'])).toEqual([]);
});

it('a run\'s stop is set only by stopRun in src/harvest/run-state.ts', () => {
  expect(linesMatching(PRODUCTION, /\.stopped\s*=[^=]/, ['src/harvest/run-state.ts'])).toEqual([]);
});

it('the workflow reserves and settles the run\'s budget only in the bracket (workflows/bracket.ts)', () => {
  expect(linesMatching(['workflows'], /\b(reserve|settle)\(/, ['workflows/bracket.ts'])).toEqual([]);
});

it('the one work frame is activities/work-frame.ts: no other activity makes a checkpoint heartbeat or loads a journal to work in', () => {
  expect(linesMatching(['activities'], /new CheckpointHeartbeat\b/, ['activities/work-frame.ts'])).toEqual([]);
  // landed-enrichment.ts's workSpent reads a failed work's journal for its totals; it buys nothing.
  expect(linesMatching(['activities'], /CallJournal\.load\(/, ['activities/work-frame.ts', 'activities/landed-enrichment.ts'])).toEqual([]);
});
