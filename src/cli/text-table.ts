/**
 * Aligned plain-text tables, as every listing command prints them: columns padded to their widest
 * cell (numbers may align right), a rule under the header, and no trailing spaces.
 */
export interface TextTableOptions {
  /** Columns aligned right (counts, credits). */
  rightAligned?: readonly boolean[];
  /** Cells longer than this many characters are cut to it, their last character an ellipsis (…) that marks the cut. */
  maxCellWidth?: number;
  /** Draw a rule of dashes under the header. */
  rule?: boolean;
  /** Put in front of every line. */
  indent?: string;
}

export interface TextTableLayout extends TextTableOptions {
  /** Column widths to use instead of the widest cells (a page of a longer table). */
  widths?: readonly number[];
  /** Print the header and its rule (default true); false for a page under an earlier header. */
  header?: boolean;
}

/** Each column's widest cell, header included. A loop, not Math.max(...cells): a spread overflows the stack at ~130k rows. */
export function columnWidths(header: readonly string[], rows: readonly (readonly string[])[], options: TextTableOptions = {}): number[] {
  const cut = cutter(options);
  const widths = header.map((title) => cut(title).length);
  for (const row of rows) for (let index = 0; index < widths.length; index++) widths[index] = Math.max(widths[index]!, cut(row[index] ?? '').length);
  return widths;
}

export function textTable(header: readonly string[], rows: readonly (readonly string[])[], options: TextTableLayout = {}): string {
  const cut = cutter(options);
  const widths = options.widths ?? columnWidths(header, rows, options);
  const line = (cells: readonly string[]) =>
    `${options.indent ?? ''}${cells
      .map((cell, index) => (options.rightAligned?.[index] ? cut(cell).padStart(widths[index]!) : cut(cell).padEnd(widths[index]!)))
      .join('  ')}`.trimEnd();
  const rule = options.rule === false ? [] : [line(widths.map((width) => '-'.repeat(width)))];
  const top = options.header === false ? [] : [line(header), ...rule];
  return [...top, ...rows.map(line)].join('\n');
}

function cutter(options: TextTableOptions): (cell: string) => string {
  return (cell) => cutCell(cell, options.maxCellWidth);
}

/** The cell as a table of at most `maxWidth` characters a cell shows it: whole, or cut with … as its last character. */
export function cutCell(cell: string, maxWidth: number | undefined): string {
  if (maxWidth === undefined || cell.length <= maxWidth) return cell;
  return `${cell.slice(0, Math.max(0, maxWidth - 1))}…`;
}
