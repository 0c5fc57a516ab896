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
 * One colour per harvest, the same in every chart and in every report: the palette entry its name
 * hashes to (FNV-1a), so a harvest keeps its colour whichever other harvests a report shows. (Taken
 * in turn by sorted name, as they were, a harvest changed colour when another joined the report.)
 * Two harvests of one report that hash to the same entry: the later name, sorted, takes the next
 * entry free in the report; only then does a colour depend on the others. Past ten harvests
 * colours repeat.
 */
export function harvestColors(harvests: Iterable<string>): Map<string, string> {
  const colors = new Map<string, string>();
  const taken = new Set<number>();
  for (const harvest of [...new Set(harvests)].sort()) {
    let index = fnv1a(harvest) % HARVEST_PALETTE.length;
    for (let step = 0; step < HARVEST_PALETTE.length && taken.has(index); step++) index = (index + 1) % HARVEST_PALETTE.length;
    taken.add(index);
    if (taken.size === HARVEST_PALETTE.length) taken.clear();
    colors.set(harvest, HARVEST_PALETTE[index]!);
  }
  return colors;
}

/** FNV-1a, 32 bits, of the text's UTF-16 code units: a small stable hash (no cryptography needed, so no library). */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < text.length; index++) hash = Math.imul(hash ^ text.charCodeAt(index), 0x01000193);
  return hash >>> 0;
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

/** A point of a line chart over days: one series' value on one day, null for a day it has none. */
export interface DailyPoint {
  day: string;
  series: string;
  value: number | null;
  description: string;
}

/**
 * One line per series across the days (an ordinal axis), a point on each day with a value. A day
 * without one (null) breaks the line (Vega-Lite's default for invalid values on a path), so a
 * series is never drawn as falling to zero between days it has; a value between two gaps is a
 * point alone.
 */
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
      y: { field: 'value', type: 'quantitative', title: options.yTitle, axis: countAxis(Math.max(0, ...options.points.map((point) => point.value ?? 0)), 6) },
      color,
    },
    layer: [
      { mark: { type: 'line', strokeWidth: 2, aria: false } },
      { transform: [{ filter: 'datum.value !== null' }], mark: { type: 'point', filled: true, size: 40, opacity: 1 }, encoding: { description: { field: 'description' } } },
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
  /** Its colour: the legend's colour for `key`, when the chart has a legend. */
  color: string;
  /** What its colour means (a platform), for the legend. */
  key?: string;
}

/**
 * Horizontal bars in the order given, labels on the left and values at the bar ends; a bar for
 * each value above zero. `counts` keeps the axis to whole numbers. With `legend`, the bars are
 * coloured by their `key` and a legend says what each colour is; without, the bars' own labels
 * must say it (a harvest's, a status's bar).
 */
export function horizontalBarChart(options: { title: string; subtitle?: string; xTitle: string; bars: HorizontalBar[]; labelWidth?: number; counts?: boolean; legend?: ColorKey }): TopLevelSpec {
  const labels = options.bars.map((bar) => bar.label);
  const max = Math.max(0, ...options.bars.map((bar) => bar.value));
  const legend = options.legend;
  const color = legend
    ? ({ field: 'key', type: 'nominal', title: legend.title, scale: colorScale(legend, options.bars.flatMap((bar) => (bar.key === undefined ? [] : [bar.key]))) } as const)
    : ({ field: 'color', type: 'nominal', scale: null } as const);
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
      { transform: [{ filter: 'datum.value > 0' }], mark: { type: 'bar', height: { band: 0.7 } }, encoding: { color, description: { field: 'description' } } },
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

/** The trend chart's plot height, in pixels, and the room one line's label takes: 11 px text, whose box a browser draws about 1.2 em high, and a gap. */
const TREND_HEIGHT = 300;
const TREND_LABEL_ROOM = 16;

/**
 * Where each label goes on the y scale: beside its series' last point, moved up or down just
 * enough that no two labels are nearer than a label's height. Laid out here, in pixels of the
 * plot (its height and y domain are fixed below, so a value's pixel is known), because Vega-Lite
 * has no label placement: labels of series ending at the same value printed over each other.
 * Labels are kept apart whatever their x, so none overlaps another, at the cost of moving some
 * that would have fitted side by side.
 */
export function spreadLabels(values: readonly number[], domain: readonly [number, number], height = TREND_HEIGHT, room = TREND_LABEL_ROOM): number[] {
  const [low, high] = domain;
  const toPixel = (value: number) => ((high - value) / (high - low)) * height;
  const order = values.map((value, index) => ({ index, y: toPixel(value) })).sort((a, b) => a.y - b.y || a.index - b.index);
  // Down from the top, each at least `room` below the one above; then, from the bottom, any pushed past the plot back up.
  for (let position = 1; position < order.length; position++) order[position]!.y = Math.max(order[position]!.y, order[position - 1]!.y + room);
  const floor = Math.max(height, (order.length - 1) * room);
  for (let position = order.length - 1; position >= 0; position--) {
    const below = position === order.length - 1 ? floor + room : order[position + 1]!.y;
    order[position]!.y = Math.min(order[position]!.y, below - room);
  }
  const placed = new Array<number>(values.length);
  for (const { index, y } of order) placed[index] = high - (y / height) * (high - low);
  return placed;
}

/**
 * The labels (by index) that may run into each other across: those whose x ranges could meet, and
 * those joined through them. Labels of groups apart are laid out apart, each near its own point. The
 * x of a label is its last point's time on the chart's time scale (over `times`, every point's), its
 * plot taken narrower than it can be (the y axis and its title take some of `width`), and its width
 * wider than it draws, so labels are grouped whenever they might meet.
 */
function sideBySide(labelled: readonly TrendPoint[], times: readonly number[], width: number): number[][] {
  const [first, last] = [Math.min(...times), Math.max(...times)];
  const plot = Math.max(1, width - 120);
  const x = (at: number) => (last > first ? ((at - first) / (last - first)) * plot : 0);
  const textWidth = (label: string) => 7 + label.length * 11 * 0.75 + 4;
  const order = labelled.map((point, index) => ({ index, left: x(point.at), right: x(point.at) + textWidth(point.label) })).sort((a, b) => a.left - b.left);
  const groups: number[][] = [];
  let reach = -Infinity;
  for (const label of order) {
    if (label.left >= reach) groups.push([]);
    groups.at(-1)!.push(label.index);
    reach = Math.max(reach, label.right);
  }
  return groups;
}

/**
 * Values over time: a grey line per series through its observations, each observation a point in
 * its harvest's colour (a series of one observation is that point alone), the last one labelled,
 * the labels kept apart (spreadLabels). Time is on a UTC scale.
 */
export function trendChart(options: { title: string; subtitle?: string; yTitle: string; points: TrendPoint[]; color: ColorKey; width: number }): TopLevelSpec {
  const last = new Map<string, TrendPoint>();
  for (const point of options.points) if (point.at >= (last.get(point.series)?.at ?? -Infinity)) last.set(point.series, point);
  const values = options.points.map((point) => ({ ...point, last: last.get(point.series) === point }));
  const all = options.points.map((point) => point.value);
  const [min, max] = [Math.min(...all), Math.max(...all)];
  // A fixed domain (no nice rounding) so spreadLabels knows each value's pixel; a flat series gets a band around its value.
  const pad = max > min ? (max - min) * 0.04 : Math.max(1, Math.abs(max) * 0.1);
  const domain: [number, number] = [min >= 0 ? Math.max(0, min - pad) : min - pad, max + pad];
  const y = { type: 'quantitative', title: options.yTitle, scale: { zero: false, nice: false, domain }, axis: siAxis(6) } as const;
  const labelled = [...last.values()];
  const labelValues = new Array<number>(labelled.length);
  for (const group of sideBySide(labelled, options.points.map((point) => point.at), options.width)) {
    const placed = spreadLabels(
      group.map((index) => labelled[index]!.value),
      domain,
    );
    group.forEach((index, position) => (labelValues[index] = placed[position]!));
  }
  const labels = labelled.map((point, index) => ({ at: point.at, labelValue: labelValues[index]!, label: point.label }));
  return {
    title: heading(options.title, options.subtitle),
    width: options.width,
    height: TREND_HEIGHT,
    autosize: { type: 'fit-x', contains: 'padding' },
    encoding: {
      x: {
        field: 'at',
        type: 'temporal',
        title: 'observed (UTC)',
        // Not rounded out to nice times: sideBySide places labels on this domain.
        scale: { type: 'utc', nice: false },
        // The day over the time of day, so a tick between midnights still says which day it is.
        axis: { tickCount: 6, labelOverlap: true, labelExpr: "[utcFormat(datum.value, '%b %d'), utcFormat(datum.value, '%H:%M')]" },
      },
    },
    layer: [
      {
        data: { values },
        encoding: { y: { field: 'value', ...y } },
        layer: [
          { mark: { type: 'line', color: TREND_LINE, strokeWidth: 1.5, aria: false }, encoding: { detail: { field: 'series', type: 'nominal' } } },
          {
            mark: { type: 'circle', size: 44, opacity: 1 },
            encoding: { color: { field: 'harvest', type: 'nominal', title: options.color.title, scale: colorScale(options.color, values.map((point) => point.harvest)) }, description: { field: 'description' } },
          },
        ],
      },
      {
        data: { values: labels },
        mark: { type: 'text', align: 'left', baseline: 'middle', dx: 7, fontSize: 11, color: '#323f4b', aria: false },
        encoding: { y: { field: 'labelValue', ...y }, text: { field: 'label' } },
      },
    ],
  };
}
