/**
 * The report's charts: Vega-Lite specs, compiled to Vega and drawn to static SVG by Vega's headless
 * view while the report is made. The page gets the SVG only: no script runs in it and nothing is
 * fetched, since every spec holds its data inline.
 *
 * Every data mark (a bar, a point) has a description, which Vega writes as the mark's aria-label
 * (screen readers read it) and `renderChart` repeats as its SVG <title> (the tooltip a browser
 * shows). It says what the mark is and ends in its value: `harvest sample, 2024-05-01: 120 credits`.
 */
import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';

/**
 * Without the native `canvas` package Vega guesses a text's width at 0.8 em a character, half
 * again as wide as a sans-serif font draws it: labels were cut short and legends ran off the
 * chart. Vega takes a replacement for its guess (vl-convert sets one the same way); 0.6 em a
 * character is close for the labels here, and errs wide.
 */
const textMetrics = (vega as unknown as { textMetrics: { width: (item: { fontSize?: number; fontWeight?: string | number }, text: unknown) => number } }).textMetrics;
textMetrics.width = (item, text) => String(text ?? '').length * (item.fontSize ?? 11) * (item.fontWeight === 'bold' || Number(item.fontWeight) >= 600 ? 0.66 : 0.6);

/** Tableau 10, the harvests' colours: distinguishable, and readable on white. */
export const HARVEST_PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'] as const;
/** ColorBrewer Set2, the endpoints' colours: muted, so an endpoint is not mistaken for a harvest. */
export const ENDPOINT_PALETTE = ['#66c2a5', '#fc8d62', '#8da0cb', '#e78ac3', '#a6d854', '#ffd92f', '#e5c494', '#b3b3b3'] as const;
/** Lines that join one item's or account's observations; the points on them carry the colour. */
const TREND_LINE = '#9aa5b1';

/**
 * One colour per harvest, the same in every chart: the harvest names, sorted, take the palette in
 * turn (past ten harvests the colours repeat).
 */
export function harvestColors(harvests: Iterable<string>): Map<string, string> {
  return new Map([...new Set(harvests)].sort().map((harvest, index) => [harvest, HARVEST_PALETTE[index % HARVEST_PALETTE.length]!]));
}

/** A colour scale over the given names, in that order, each with its colour. */
export interface ColorKey {
  title: string;
  colors: Map<string, string>;
}

const CONFIG = {
  font: 'system-ui, sans-serif',
  background: 'transparent',
  view: { stroke: null },
  axis: { labelColor: '#52606d', titleColor: '#52606d', titleFontWeight: 'normal', titleFontSize: 12, labelFontSize: 11, gridColor: '#e4e7eb', domainColor: '#9aa5b1', tickColor: '#9aa5b1' },
  // Above the plot, wrapped into rows of four.
  legend: { orient: 'top', direction: 'horizontal', columns: 4, labelFontSize: 12, titleFontSize: 12, titleFontWeight: 'normal', labelLimit: 200 },
  title: { anchor: 'start', fontSize: 15, fontWeight: 600, color: '#1f2933', subtitleColor: '#616e7c', subtitleFontSize: 12, offset: 12 },
} as const;

/** The chart's width in pixels; the page scales the SVG to its box. */
const FULL_WIDTH = 960;

/** Vega-Lite's warnings mean a spec here is wrong (a field it cannot use, a channel it drops): they fail the report. */
class FailOnWarning {
  level(): number;
  level(_: number): this;
  level(_?: number): number | this {
    return _ === undefined ? 2 : this;
  }
  warn(...args: readonly unknown[]): this {
    throw new Error(`vega-lite: ${args.join(' ')}`);
  }
  error(...args: readonly unknown[]): this {
    throw new Error(`vega-lite: ${args.join(' ')}`);
  }
  info(): this {
    return this;
  }
  debug(): this {
    return this;
  }
}

/** Vega's log levels (vega-util): errors only, since a chart with empty data is no cause for a warning. */
const VEGA_LOG_ERRORS = 1;

/** A data mark's SVG as Vega writes it: its description as aria-label, then the rest of its attributes. */
const DESCRIBED_MARK = /<path aria-label="([^"]*)" role="graphics-symbol"([^>]*)\/>/g;

/**
 * The spec drawn as an SVG element for inline use in HTML. The namespace declarations Vega writes
 * for a standalone file are dropped: HTML puts an inline <svg> in the SVG namespace by itself, and
 * the page then holds no URL but its item links.
 */
export async function renderChart(spec: TopLevelSpec, kind: string): Promise<string> {
  const vegaSpec = compile({ config: CONFIG, ...spec } as TopLevelSpec, { logger: new FailOnWarning() }).spec;
  const view = new vega.View(vega.parse(vegaSpec), { renderer: 'none', logLevel: VEGA_LOG_ERRORS });
  try {
    const svg = await view.toSVG();
    return svg
      .replace(/^<svg [^>]*?(width="[^"]*" height="[^"]*" viewBox="[^"]*")>/, `<svg class="chart chart-${kind}" $1>`)
      .replace(DESCRIBED_MARK, '<path aria-label="$1" role="graphics-symbol"$2><title>$1</title></path>');
  } finally {
    view.finalize();
  }
}

/** The key's colours for the names a chart shows, so its legend lists only those. */
function colorScale(key: ColorKey, shown: Iterable<string>) {
  const names = new Set(shown);
  const domain = [...key.colors.keys()].filter((name) => names.has(name));
  return { domain, range: domain.map((name) => key.colors.get(name)!) };
}

function heading(title: string, subtitle?: string) {
  return subtitle === undefined ? { text: title } : { text: title, subtitle };
}

/** An axis with SI prefixes (12k, 2.5M); d3 writes zero with the top tick's prefix ("0M"), this as "0". */
function siAxis(tickCount: number) {
  return { format: '~s', labelExpr: "datum.value === 0 ? '0' : datum.label", tickCount };
}

/**
 * An axis of counts up to `max`: whole-number ticks (on a small domain Vega's own fall half a unit
 * apart, whatever tickMinStep says), and SI prefixes (12k) from 1,000 on.
 */
function countAxis(max: number, tickCount: number) {
  if (max < tickCount) return { format: 'd', values: Array.from({ length: Math.floor(max) + 1 }, (_, tick) => tick) };
  return max < 1000 ? { format: 'd', tickCount } : siAxis(tickCount);
}

/** A point of a line chart over days: one series' value on one day. */
export interface DailyPoint {
  day: string;
  series: string;
  value: number;
  description: string;
}

/** One line per series across the days (an ordinal axis: a gap is a 0, given as such), a point on each day. */
export function dailyLineChart(options: { title: string; subtitle?: string; yTitle: string; points: DailyPoint[]; color: ColorKey }): TopLevelSpec {
  const color = { field: 'series', type: 'nominal', title: options.color.title, scale: colorScale(options.color, options.points.map((point) => point.series)) } as const;
  const days = new Set(options.points.map((point) => point.day)).size;
  return {
    title: heading(options.title, options.subtitle),
    width: FULL_WIDTH,
    height: 240,
    autosize: { type: 'fit-x', contains: 'padding' },
    data: { values: options.points },
    encoding: {
      x: { field: 'day', type: 'ordinal', title: 'UTC day', axis: { labelAngle: days > 12 ? -45 : 0, labelOverlap: true } },
      y: { field: 'value', type: 'quantitative', title: options.yTitle, axis: countAxis(Math.max(0, ...options.points.map((point) => point.value)), 6) },
      color,
    },
    layer: [
      { mark: { type: 'line', strokeWidth: 2, aria: false } },
      { mark: { type: 'point', filled: true, size: 40, opacity: 1 }, encoding: { description: { field: 'description' } } },
    ],
  };
}

/** One segment of a column: a series' value in one column. */
export interface ColumnSegment {
  /** The column it belongs to: a key, unique per column. */
  column: string;
  series: string;
  value: number;
  description: string;
}

/**
 * Vertical bars, a column per key in `columns` (left to right, labelled by `labels`, whose lines
 * are split at "\n"), stacked in the order of `color`'s names from the bottom. Only segments above
 * zero are drawn.
 */
export function columnChart(options: { title: string; subtitle?: string; yTitle: string; columns: string[]; labels: Map<string, string>; segments: ColumnSegment[]; color: ColorKey }): TopLevelSpec {
  const order = [...options.color.colors.keys()];
  const segments = options.segments.filter((segment) => segment.value > 0).map((segment) => ({ ...segment, stackOrder: order.indexOf(segment.series) }));
  const labels = Object.fromEntries(options.columns.map((column) => [column, (options.labels.get(column) ?? column).split('\n')]));
  const stackTotals = new Map<string, number>();
  for (const segment of segments) stackTotals.set(segment.column, (stackTotals.get(segment.column) ?? 0) + segment.value);
  return {
    title: heading(options.title, options.subtitle),
    width: FULL_WIDTH,
    height: 240,
    autosize: { type: 'fit-x', contains: 'padding' },
    data: { values: segments },
    mark: { type: 'bar' },
    encoding: {
      x: {
        field: 'column',
        type: 'ordinal',
        title: null,
        scale: { domain: options.columns },
        // The column keys are unique (a run id, a day); the axis shows each one's label instead.
        axis: { labelExpr: `${JSON.stringify(labels)}[datum.value]`, labelAngle: options.columns.length > 12 ? -45 : 0, labelOverlap: true, labelLimit: 160 },
      },
      y: { field: 'value', type: 'quantitative', title: options.yTitle, stack: 'zero', axis: countAxis(Math.max(0, ...stackTotals.values()), 6) },
      color: { field: 'series', type: 'nominal', title: options.color.title, scale: colorScale(options.color, segments.map((segment) => segment.series)) },
      order: { field: 'stackOrder', type: 'quantitative' },
      description: { field: 'description' },
    },
  };
}

export interface HorizontalBar {
  label: string;
  value: number;
  /** The value as the bar's end shows it. */
  valueText: string;
  description: string;
  color: string;
}

/**
 * Horizontal bars in the order given, labels on the left and values at the bar ends; a bar for
 * each value above zero. `counts` keeps the axis to whole numbers.
 */
export function horizontalBarChart(options: { title: string; subtitle?: string; xTitle: string; bars: HorizontalBar[]; labelWidth?: number; counts?: boolean }): TopLevelSpec {
  const labels = options.bars.map((bar) => bar.label);
  const max = Math.max(0, ...options.bars.map((bar) => bar.value));
  return {
    title: heading(options.title, options.subtitle),
    width: FULL_WIDTH,
    height: Math.max(options.bars.length, 1) * 26,
    autosize: { type: 'fit-x', contains: 'padding' },
    data: { values: options.bars },
    encoding: {
      y: { field: 'label', type: 'ordinal', title: null, scale: { domain: labels }, axis: { labelLimit: options.labelWidth ?? 240, labelFontSize: 12, ticks: false, domain: false } },
      x: {
        field: 'value',
        type: 'quantitative',
        title: options.xTitle,
        // Room past the longest bar for its value.
        scale: { domainMax: max * 1.15 },
        axis: options.counts ? countAxis(max, 8) : siAxis(8),
      },
    },
    layer: [
      { transform: [{ filter: 'datum.value > 0' }], mark: { type: 'bar', height: { band: 0.7 } }, encoding: { color: { field: 'color', type: 'nominal', scale: null }, description: { field: 'description' } } },
      { mark: { type: 'text', align: 'left', dx: 6, fontSize: 11, color: '#323f4b', aria: false }, encoding: { text: { field: 'valueText' } } },
    ],
  };
}

/** One observation in a trend chart. */
export interface TrendPoint {
  /** The item or account observed: one line each. */
  series: string;
  /** What the line's last point is labelled with (its rank). */
  label: string;
  /** Observation time, epoch milliseconds. */
  at: number;
  value: number;
  /** The harvest whose run made the observation: the point's colour. */
  harvest: string;
  description: string;
}

/**
 * Values over time: a grey line per series through its observations, each observation a point in
 * its harvest's colour, the last one labelled. Time is on a UTC scale.
 */
export function trendChart(options: { title: string; subtitle?: string; yTitle: string; points: TrendPoint[]; color: ColorKey; width: number }): TopLevelSpec {
  const lastAt = new Map<string, number>();
  for (const point of options.points) lastAt.set(point.series, Math.max(lastAt.get(point.series) ?? -Infinity, point.at));
  const values = options.points.map((point) => ({ ...point, last: point.at === lastAt.get(point.series) }));
  return {
    title: heading(options.title, options.subtitle),
    width: options.width,
    height: 300,
    autosize: { type: 'fit-x', contains: 'padding' },
    data: { values },
    encoding: {
      x: {
        field: 'at',
        type: 'temporal',
        title: 'observed (UTC)',
        scale: { type: 'utc' },
        // The day over the time of day, so a tick between midnights still says which day it is.
        axis: { tickCount: 6, labelOverlap: true, labelExpr: "[utcFormat(datum.value, '%b %d'), utcFormat(datum.value, '%H:%M')]" },
      },
      y: { field: 'value', type: 'quantitative', title: options.yTitle, scale: { zero: false }, axis: siAxis(6) },
    },
    layer: [
      { mark: { type: 'line', color: TREND_LINE, strokeWidth: 1.5, aria: false }, encoding: { detail: { field: 'series', type: 'nominal' } } },
      {
        mark: { type: 'circle', size: 44, opacity: 1 },
        encoding: { color: { field: 'harvest', type: 'nominal', title: options.color.title, scale: colorScale(options.color, values.map((point) => point.harvest)) }, description: { field: 'description' } },
      },
      { transform: [{ filter: 'datum.last' }], mark: { type: 'text', align: 'left', dx: 7, fontSize: 11, color: '#323f4b', aria: false }, encoding: { text: { field: 'label' } } },
    ],
  };
}
