/**
 * RFC 4180 CSV lines: fields with a comma, quote or line break are quoted, quotes doubled.
 * Hand-written because it is a few lines and both the emulator and the CLI need exactly this.
 */
export function csvField(value: unknown): string {
  const text = value === undefined || value === null ? '' : typeof value === 'object' ? JSON.stringify(value) : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function csvLine(values: readonly unknown[]): string {
  return values.map(csvField).join(',');
}
