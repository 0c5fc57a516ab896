/**
 * zod's issues turned into the config's problems: each with the path and position of the value at
 * fault, the value itself, and for an unknown key the closest known one; listed in reading order.
 */
import type { z } from 'zod';
import { formatPath, type Path, type PathSegment, type Position, type SourceMap } from './yaml-positions.js';

export interface Problem {
  path: Path;
  message: string;
  position: Position;
  /** The value is absent, so the position is its parent's. */
  missing: boolean;
  unknownKey?: boolean;
  /** Where to sort it, when not at its position. */
  sortPosition?: Position;
}

export function problemsOf(issue: z.core.$ZodIssue, base: Path, input: unknown, source: SourceMap): Problem[] {
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
export function byReadingOrder(a: Problem, b: Problem): number {
  const pa = a.sortPosition ?? a.position;
  const pb = b.sortPosition ?? b.position;
  return pa.line - pb.line || Number(a.missing) - Number(b.missing) || pa.col - pb.col;
}

export function placeMissingAfterUnknownKeys(problems: Problem[]): Problem[] {
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

export function dedupe(problems: Problem[]): Problem[] {
  const seen = new Set<string>();
  return problems.filter((problem) => {
    const key = `${formatPath(problem.path)}\n${problem.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
