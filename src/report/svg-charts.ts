/**
 * Charts as inline SVG strings, drawn here rather than by a charting library so the report is
 * one self-contained file that works offline. Pure functions: data in, markup out. Every string
 * that reaches the markup goes through `escapeXml`.
 *
 * Conventions the report's tests rely on: a bar is `<rect class="bar" data-value=…>` (one per
 * non-zero value), a line chart's point is `<circle class="point" data-value=…>` (one per category
 * and series, zeros included, so lines stay continuous).
 */

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text made safe for HTML and SVG, in element content and in quoted attribute values alike. */
export function escapeXml(value: unknown): string {
  return String(value ?? '').replace(/[&<>"']/g, (char) => ENTITIES[char]!);
}

/** Tableau 10: distinguishable, and readable on white. */
export const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'] as const;

export function seriesColor(index: number): string {
  return PALETTE[index % PALETTE.length]!;
}

export interface Series {
  name: string;
  values: number[];
  color?: string;
}

export interface ChartOptions {
  title: string;
  /** Under the title, in grey. */
  subtitle?: string;
  yLabel?: string;
  width?: number;
  height?: number;
  /** Axis ticks and value labels; tooltips always show the full number. */
  formatValue?: (value: number) => string;
  /** Ticks at whole numbers only (counts). */
  integer?: boolean;
}

export interface CategoryChartOptions extends ChartOptions {
  /** The x axis, left to right. */
  categories: string[];
  series: Series[];
}

export interface BarChartOptions extends CategoryChartOptions {
  /** Total above each stack, when there is room. */
  showTotals?: boolean;
  /** A note per category, added to its bars' tooltips and kept as their data-note (what the bar is: a run and its status). */
  categoryNotes?: string[];
}

export interface HorizontalBar {
  label: string;
  value: number;
  /** Tooltip text; the label and value when absent. */
  tooltip?: string;
  color?: string;
}

export interface HorizontalBarChartOptions extends ChartOptions {
  bars: HorizontalBar[];
  /** Width kept for the labels on the left. */
  labelWidth?: number;
}

/** 1,234 / 12.3k / 4.5M: short enough for an axis. */
export function formatCompact(value: number): string {
  const abs = Math.abs(value);
  // Three significant digits or so; Number() drops the trailing zeros of the decimals only.
  const trim = (n: number) => String(Number(n.toFixed(Math.abs(n) >= 100 ? 0 : Math.abs(n) >= 10 ? 1 : 2)));
  if (abs >= 1e9) return `${trim(value / 1e9)}B`;
  if (abs >= 1e6) return `${trim(value / 1e6)}M`;
  if (abs >= 1e4) return `${trim(value / 1e3)}k`;
  if (Number.isInteger(value)) return value.toLocaleString('en-US');
  return trim(value);
}

/** The full number, grouped: 1,234,567 (two decimals at most). */
export function formatFull(value: number): string {
  return value.toLocaleString('en-US', { maximumFractionDigits: 2 });
}

/** Evenly spaced round ticks from 0 to at least `max`: steps of 1, 2 or 5 times a power of ten. */
export function niceTicks(max: number, target = 5, integer = false): number[] {
  if (!(max > 0) || !Number.isFinite(max)) return [0, 1];
  const rough = max / target;
  const power = 10 ** Math.floor(Math.log10(rough));
  const fraction = rough / power;
  let step = (fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10) * power;
  if (integer) step = Math.max(1, Math.round(step));
  const ticks: number[] = [];
  const top = Math.ceil(max / step - 1e-9) * step;
  for (let value = 0; value <= top + step / 2; value += step) ticks.push(Number(value.toPrecision(12)));
  return ticks;
}

/** A label cut to `max` characters, with an ellipsis. */
export function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, Math.max(1, max - 1))}…`;
}

/** Rough width of text at the chart's font size: good enough to lay out labels. */
function textWidth(text: string, fontSize = 12): number {
  return text.length * fontSize * 0.58;
}

const n = (value: number) => Number(value.toFixed(2));

interface Frame {
  width: number;
  height: number;
  top: number;
  parts: string[];
}

/** The chart's root, title, subtitle and legend; returns where the plot may start. */
function frame(options: ChartOptions, legend: { name: string; color: string }[], defaultHeight: number): Frame {
  const width = options.width ?? 960;
  const height = options.height ?? defaultHeight;
  const parts: string[] = [];
  parts.push(`<text class="chart-title" x="16" y="24" font-size="15" font-weight="600" fill="#1f2933">${escapeXml(options.title)}</text>`);
  let top = 34;
  if (options.subtitle) {
    parts.push(`<text class="chart-subtitle" x="16" y="${top + 9}" font-size="12" fill="#616e7c">${escapeXml(options.subtitle)}</text>`);
    top += 16;
  }
  if (legend.length > 1) {
    let x = 16;
    let y = top + 10;
    const items: string[] = [];
    for (const entry of legend) {
      const label = truncate(entry.name, 40);
      const itemWidth = 18 + textWidth(label) + 18;
      if (x + itemWidth > width - 16 && x > 16) {
        x = 16;
        y += 18;
      }
      items.push(
        `<g class="legend-item"><rect x="${n(x)}" y="${y - 9}" width="11" height="11" rx="2" fill="${escapeXml(entry.color)}"/><text x="${n(x + 16)}" y="${y}" font-size="12" fill="#323f4b">${escapeXml(label)}<title>${escapeXml(entry.name)}</title></text></g>`,
      );
      x += itemWidth;
    }
    parts.push(`<g class="legend">${items.join('')}</g>`);
    top = y + 8;
  }
  return { width, height, top: top + 12, parts };
}

function svg(title: string, kind: string, width: number, height: number, parts: string[]): string {
  return `<svg class="chart chart-${kind}" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${escapeXml(title)}" font-family="inherit">${parts.join('')}</svg>`;
}

interface Plot {
  left: number;
  right: number;
  top: number;
  bottom: number;
  max: number;
  y: (value: number) => number;
}

/** Gridlines, the y axis with its ticks and label, and the x baseline. */
function valueAxis(parts: string[], options: ChartOptions, box: { left: number; right: number; top: number; bottom: number }, maxValue: number): Plot {
  const format = options.formatValue ?? formatCompact;
  const ticks = niceTicks(maxValue, 5, options.integer);
  const max = ticks[ticks.length - 1]!;
  const y = (value: number) => box.bottom - (value / max) * (box.bottom - box.top);
  const grid: string[] = [];
  for (const tick of ticks) {
    const ty = n(y(tick));
    grid.push(`<line x1="${box.left}" x2="${box.right}" y1="${ty}" y2="${ty}" stroke="${tick === 0 ? '#9aa5b1' : '#e4e7eb'}" stroke-width="1"/>`);
    grid.push(`<text x="${box.left - 8}" y="${n(ty + 4)}" font-size="11" fill="#616e7c" text-anchor="end">${escapeXml(format(tick))}</text>`);
  }
  parts.push(`<g class="y-axis">${grid.join('')}</g>`);
  parts.push(`<line class="axis" x1="${box.left}" x2="${box.left}" y1="${box.top}" y2="${box.bottom}" stroke="#9aa5b1" stroke-width="1"/>`);
  if (options.yLabel) {
    const cy = n((box.top + box.bottom) / 2);
    parts.push(`<text class="y-label" x="14" y="${cy}" font-size="12" fill="#52606d" text-anchor="middle" transform="rotate(-90 14 ${cy})">${escapeXml(options.yLabel)}</text>`);
  }
  return { ...box, max, y };
}

/** Category labels under the plot, thinned out so they never overlap. */
function categoryAxis(parts: string[], categories: string[], center: (index: number) => number, band: number, bottom: number): void {
  const labels = categories.map((category) => truncate(category, 18));
  const widest = Math.max(0, ...labels.map((label) => textWidth(label, 11)));
  const rotate = widest + 8 > band;
  const needed = rotate ? 16 : widest + 10;
  const step = Math.max(1, Math.ceil(needed / Math.max(band, 1)));
  const out: string[] = [];
  categories.forEach((category, index) => {
    if (index % step !== 0) return;
    const x = n(center(index));
    const label = labels[index]!;
    out.push(`<line x1="${x}" x2="${x}" y1="${bottom}" y2="${bottom + 4}" stroke="#9aa5b1"/>`);
    if (rotate) {
      out.push(`<text x="${x}" y="${bottom + 14}" font-size="11" fill="#52606d" text-anchor="end" transform="rotate(-30 ${x} ${bottom + 14})">${escapeXml(label)}<title>${escapeXml(category)}</title></text>`);
    } else {
      out.push(`<text x="${x}" y="${bottom + 17}" font-size="11" fill="#52606d" text-anchor="middle">${escapeXml(label)}<title>${escapeXml(category)}</title></text>`);
    }
  });
  parts.push(`<g class="x-axis">${out.join('')}</g>`);
}

function bottomMargin(categories: string[], plotWidth: number): number {
  const band = plotWidth / Math.max(categories.length, 1);
  const widest = Math.max(0, ...categories.map((category) => textWidth(truncate(category, 18), 11)));
  // Rotated labels need room below the axis, about half their length at -30 degrees.
  return widest + 8 > band ? Math.min(110, 24 + widest * 0.5) : 30;
}

function noData(parts: string[], width: number, top: number, height: number): void {
  parts.push(`<text class="no-data" x="${width / 2}" y="${n((top + height) / 2)}" font-size="13" fill="#7b8794" text-anchor="middle">No data</text>`);
}

function legendOf(series: Series[]): { name: string; color: string }[] {
  return series.map((entry, index) => ({ name: entry.name, color: entry.color ?? seriesColor(index) }));
}

/**
 * Vertical bars, one column per category; with several series the bars are stacked, in series
 * order from the bottom. A bar is drawn for each value above zero.
 */
export function barChart(options: BarChartOptions): string {
  const format = options.formatValue ?? formatCompact;
  const legend = legendOf(options.series);
  const f = frame(options, legend, 320);
  const { categories, series } = options;
  const left = 64;
  const right = f.width - 20;
  const bottom = f.height - bottomMargin(categories, right - left);
  const totals = categories.map((_, index) => series.reduce((sum, entry) => sum + Math.max(0, entry.values[index] ?? 0), 0));
  const maxTotal = Math.max(0, ...totals);
  const plot = valueAxis(f.parts, options, { left, right, top: f.top, bottom }, maxTotal);
  if (categories.length === 0 || maxTotal === 0) {
    noData(f.parts, f.width, f.top, bottom);
    return svg(options.title, 'bar', f.width, f.height, f.parts);
  }
  const band = (right - left) / categories.length;
  const barWidth = Math.max(1, Math.min(band * 0.72, 56));
  const center = (index: number) => left + band * (index + 0.5);
  const bars: string[] = [];
  const labels: string[] = [];
  categories.forEach((category, index) => {
    let base = 0;
    series.forEach((entry, seriesIndex) => {
      const value = entry.values[index] ?? 0;
      if (!(value > 0)) return;
      const y0 = plot.y(base);
      const y1 = plot.y(base + value);
      base += value;
      const note = options.categoryNotes?.[index];
      const tooltip = `${series.length > 1 ? `${category} · ${entry.name}: ${formatFull(value)}` : `${category}: ${formatFull(value)}`}${note ? ` · ${note}` : ''}`;
      bars.push(
        `<rect class="bar" x="${n(center(index) - barWidth / 2)}" y="${n(y1)}" width="${n(barWidth)}" height="${n(Math.max(y0 - y1, 0.5))}" fill="${escapeXml(legend[seriesIndex]!.color)}" data-series="${escapeXml(entry.name)}" data-category="${escapeXml(category)}" data-value="${value}"${note ? ` data-note="${escapeXml(note)}"` : ''}><title>${escapeXml(tooltip)}</title></rect>`,
      );
    });
    const total = totals[index]!;
    if ((options.showTotals ?? true) && total > 0 && textWidth(format(total), 11) <= band + 4) {
      labels.push(`<text class="value-label" x="${n(center(index))}" y="${n(plot.y(total) - 5)}" font-size="11" fill="#323f4b" text-anchor="middle">${escapeXml(format(total))}</text>`);
    }
  });
  f.parts.push(`<g class="bars">${bars.join('')}</g>`, `<g class="value-labels">${labels.join('')}</g>`);
  categoryAxis(f.parts, categories, center, band, bottom);
  return svg(options.title, 'bar', f.width, f.height, f.parts);
}

/** One line per series across the categories, with a point at each value. */
export function lineChart(options: CategoryChartOptions): string {
  const legend = legendOf(options.series);
  const f = frame(options, legend, 320);
  const { categories, series } = options;
  const left = 64;
  const right = f.width - 20;
  const bottom = f.height - bottomMargin(categories, right - left);
  const maxValue = Math.max(0, ...series.flatMap((entry) => entry.values.map((value) => (Number.isFinite(value) ? value : 0))));
  const plot = valueAxis(f.parts, options, { left, right, top: f.top, bottom }, maxValue);
  if (categories.length === 0 || series.length === 0) {
    noData(f.parts, f.width, f.top, bottom);
    return svg(options.title, 'line', f.width, f.height, f.parts);
  }
  const band = (right - left) / categories.length;
  const center = (index: number) => left + band * (index + 0.5);
  const radius = categories.length > 60 ? 2 : categories.length > 24 ? 3 : 4;
  const lines: string[] = [];
  const points: string[] = [];
  series.forEach((entry, seriesIndex) => {
    const color = escapeXml(legend[seriesIndex]!.color);
    const coordinates = categories.map((_, index) => [center(index), plot.y(Math.max(0, entry.values[index] ?? 0))] as const);
    if (coordinates.length > 1) {
      const d = coordinates.map(([x, y], index) => `${index === 0 ? 'M' : 'L'}${n(x)} ${n(y)}`).join(' ');
      lines.push(`<path class="line" d="${d}" fill="none" stroke="${color}" stroke-width="2" stroke-linejoin="round" stroke-linecap="round" data-series="${escapeXml(entry.name)}"/>`);
    }
    coordinates.forEach(([x, y], index) => {
      const value = entry.values[index] ?? 0;
      const tooltip = series.length > 1 ? `${categories[index]} · ${entry.name}: ${formatFull(value)}` : `${categories[index]}: ${formatFull(value)}`;
      points.push(
        `<circle class="point" cx="${n(x)}" cy="${n(y)}" r="${radius}" fill="#fff" stroke="${color}" stroke-width="2" data-series="${escapeXml(entry.name)}" data-category="${escapeXml(categories[index]!)}" data-value="${value}"><title>${escapeXml(tooltip)}</title></circle>`,
      );
    });
  });
  f.parts.push(`<g class="lines">${lines.join('')}</g>`, `<g class="points">${points.join('')}</g>`);
  categoryAxis(f.parts, categories, center, band, bottom);
  return svg(options.title, 'line', f.width, f.height, f.parts);
}

/** Horizontal bars, largest first as given, labels on the left and values at the bar ends. */
export function horizontalBarChart(options: HorizontalBarChartOptions): string {
  const format = options.formatValue ?? formatCompact;
  const rowHeight = 26;
  const f = frame(options, [], 0);
  const height = options.height ?? f.top + Math.max(options.bars.length, 1) * rowHeight + 34;
  const labelWidth = options.labelWidth ?? 240;
  const left = labelWidth + 16;
  const right = f.width - 70;
  const top = f.top;
  const bottom = top + Math.max(options.bars.length, 1) * rowHeight;
  const maxValue = Math.max(0, ...options.bars.map((bar) => bar.value));
  const ticks = niceTicks(maxValue, 5, options.integer);
  const max = ticks[ticks.length - 1]!;
  const x = (value: number) => left + (Math.max(0, value) / max) * (right - left);
  const parts = f.parts;
  const grid: string[] = [];
  for (const tick of ticks) {
    const tx = n(x(tick));
    grid.push(`<line x1="${tx}" x2="${tx}" y1="${top}" y2="${bottom}" stroke="${tick === 0 ? '#9aa5b1' : '#e4e7eb'}" stroke-width="1"/>`);
    grid.push(`<text x="${tx}" y="${bottom + 16}" font-size="11" fill="#616e7c" text-anchor="middle">${escapeXml(format(tick))}</text>`);
  }
  parts.push(`<g class="x-axis">${grid.join('')}</g>`);
  if (options.yLabel) parts.push(`<text class="x-label" x="${n((left + right) / 2)}" y="${bottom + 32}" font-size="12" fill="#52606d" text-anchor="middle">${escapeXml(options.yLabel)}</text>`);
  if (options.bars.length === 0 || maxValue <= 0) {
    noData(parts, f.width, top, bottom);
    return svg(options.title, 'hbar', f.width, height, parts);
  }
  const bars: string[] = [];
  const maxChars = Math.max(4, Math.floor(labelWidth / textWidth('x')));
  options.bars.forEach((bar, index) => {
    const y = top + index * rowHeight;
    const color = escapeXml(bar.color ?? seriesColor(0));
    const tooltip = bar.tooltip ?? `${bar.label}: ${formatFull(bar.value)}`;
    bars.push(`<text class="bar-label" x="${labelWidth + 8}" y="${y + rowHeight / 2 + 4}" font-size="12" fill="#323f4b" text-anchor="end">${escapeXml(truncate(bar.label, maxChars))}<title>${escapeXml(tooltip)}</title></text>`);
    if (bar.value > 0) {
      bars.push(
        `<rect class="bar" x="${left}" y="${y + 4}" width="${n(Math.max(x(bar.value) - left, 1))}" height="${rowHeight - 8}" rx="2" fill="${color}" data-category="${escapeXml(bar.label)}" data-value="${bar.value}"><title>${escapeXml(tooltip)}</title></rect>`,
      );
    }
    bars.push(`<text class="value-label" x="${n(x(bar.value) + 6)}" y="${y + rowHeight / 2 + 4}" font-size="11" fill="#323f4b">${escapeXml(format(bar.value))}</text>`);
  });
  parts.push(`<g class="bars">${bars.join('')}</g>`);
  return svg(options.title, 'hbar', f.width, height, parts);
}
