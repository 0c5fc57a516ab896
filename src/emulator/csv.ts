import { csvLine } from '../text/csv.js';

/**
 * CSV for list endpoints: a header row, then one row per item, nested fields flattened with `_`
 * (author.handle → author_handle).
 */
function flatten(value: Record<string, unknown>, prefix = '', into: Record<string, unknown> = {}): Record<string, unknown> {
  for (const [key, field] of Object.entries(value)) {
    const name = prefix ? `${prefix}_${key}` : key;
    if (field !== null && typeof field === 'object' && !Array.isArray(field)) flatten(field as Record<string, unknown>, name, into);
    else into[name] = field;
  }
  return into;
}

export function toCsv(items: readonly Record<string, unknown>[], columns: readonly string[]): string {
  const rows = items.map((item) => flatten(item));
  const lines = [csvLine(columns), ...rows.map((row) => csvLine(columns.map((column) => row[column])))];
  return `${lines.join('\r\n')}\r\n`;
}

/** The CSV columns of each list endpoint, fixed so even an empty page has its header row. */
export function csvColumns(endpointName: string, platform: string): string[] {
  if (endpointName === 'comments') return ['id', 'text', 'author_handle', 'likes', 'posted_at'];
  if (endpointName.endsWith('search')) return ['id', 'url', 'caption', 'author_handle', 'metrics_views', 'metrics_likes', 'posted_at'];
  const views = platform === 'instagram' && endpointName === 'channel-posts' ? [] : ['metrics_views'];
  return ['id', 'url', 'caption', 'posted_at', ...views, 'metrics_likes', 'metrics_comments'];
}
