/**
 * A run's own forecast, and where the run left it: the cost plan (cost-plan.ts) made when the run
 * started, from the same history `harvester plan` reads, kept in the run's state by part (each
 * target's listing with its items' enrichment, and tracking), and compared with what each part
 * spent when the run ends. A part that spent outside its range is a miss the run's summary names,
 * with how far outside and which lines, and what they were expected from.
 */
import { linesOf, type CostPlan } from './cost-plan.js';

/** The part of a run that tracking spends in: accounts' profiles and tracked items' stats. */
export const TRACKING_PART = 'tracking';

export interface ForecastPart {
  /** A target's key (its listing and its items' enrichment), or TRACKING_PART. */
  part: string;
  expected: number;
  low: number;
  high: number;
  /** The part's lines and what each was expected from, in words. */
  lines: string;
}

export interface RunForecast {
  expectedCredits: number;
  low: number;
  high: number;
  /** Lines expected from the lake's history (the rest from the price table). */
  fromHistory: number;
  parts: ForecastPart[];
}

export interface ForecastMiss extends ForecastPart {
  spent: number;
  /** Credits past the range's edge: above the high (positive) or below the low (negative). */
  by: number;
}

/** The run's forecast, made of its cost plan: one part per target, and tracking's. */
export function runForecastOf(plan: CostPlan): RunForecast {
  const describe = (line: ReturnType<typeof linesOf>[number]) => `${line.what} ${line.expected.credits} (${line.range.low} to ${line.range.high}; ${line.basis.source === 'history' ? `history: ${line.basis.detail}` : 'price table'})`;
  const sum = (lines: ReturnType<typeof linesOf>) => ({
    expected: lines.reduce((total, line) => total + line.expected.credits, 0),
    low: lines.reduce((total, line) => total + line.range.low, 0),
    high: lines.reduce((total, line) => total + line.range.high, 0),
    lines: lines.map(describe).join('; '),
  });
  const parts: ForecastPart[] = plan.targets.map((target) => ({ part: target.key, ...sum([target.list, ...target.enrichment]) }));
  const tracking = plan.targets.flatMap((target) => [...(target.account ? [target.account] : []), ...(target.tracked ? [target.tracked] : [])]);
  if (tracking.length > 0) parts.push({ part: TRACKING_PART, ...sum(tracking) });
  return {
    expectedCredits: plan.totals.expectedCredits,
    low: plan.totals.expectedRange.low,
    high: plan.totals.expectedRange.high,
    fromHistory: plan.targets.flatMap(linesOf).filter((line) => line.basis.source === 'history').length,
    parts,
  };
}

/** What each part of the run spent: each target's work, and tracking's (the rest of the run's `creditsSpent`). */
export function spentByPart(state: { targets: ReadonlyArray<{ plan: { key: string }; credits: number }> }, creditsSpent: number): Record<string, number> {
  const spent: Record<string, number> = {};
  for (const target of state.targets) spent[target.plan.key] = target.credits;
  const targets = state.targets.reduce((total, target) => total + target.credits, 0);
  spent[TRACKING_PART] = Math.max(0, creditsSpent - targets);
  return spent;
}

/** The parts that spent outside their range, and by how much. */
export function forecastMisses(forecast: RunForecast, spent: Record<string, number>): ForecastMiss[] {
  return forecast.parts.flatMap((part) => {
    const actual = spent[part.part] ?? 0;
    if (actual > part.high) return [{ ...part, spent: actual, by: actual - part.high }];
    if (actual < part.low) return [{ ...part, spent: actual, by: actual - part.low }];
    return [];
  });
}
