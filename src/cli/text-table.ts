/**
 * Aligned plain-text tables, as every listing command prints them: columns padded to their widest
 * cell (numbers may align right), a rule under the header, and no trailing spaces.
 */
export interface TextTableOptions {
  /** Columns aligned right (counts, credits). */
  rightAligned?: readonly boolean[];
  /** Cells are cut to this many characters (long SQL values). */
  maxCellWidth?: number;
  /** Draw a rule of dashes under the header. */
  rule?: boolean;
  /** Put in front of every line. */
  indent?: string;
}

export function textTable(header: readonly string[], rows: readonly (readonly string[])[], options: TextTableOptions = {}): string {
  const cut = (cell: string) => (options.maxCellWidth === undefined ? cell : cell.slice(0, options.maxCellWidth));
  const widths = header.map((title, index) => Math.max(cut(title).length, ...rows.map((row) => cut(row[index] ?? '').length)));
  const line = (cells: readonly string[]) =>
    `${options.indent ?? ''}${cells
      .map((cell, index) => (options.rightAligned?.[index] ? cut(cell).padStart(widths[index]!) : cut(cell).padEnd(widths[index]!)))
      .join('  ')}`.trimEnd();
  const rule = options.rule === false ? [] : [line(widths.map((width) => '-'.repeat(width)))];
  return [line(header), ...rule, ...rows.map(line)].join('\n');
}
