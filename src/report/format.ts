/** Text for the report's HTML and its charts' descriptions, and the page's small pieces (a section, a chart's box, an item's link). */

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text made safe for HTML, in element content and in quoted attribute values alike. */
export function escapeHtml(value: unknown): string {
  return String(value ?? '').replace(/[&<>"']/g, (char) => ENTITIES[char]!);
}

/** The full number, grouped: 1,234,567 (two decimals at most). */
export function formatNumber(value: number): string {
  return value.toLocaleString('en-US', { maximumFractionDigits: 2 });
}

/** A share as a percentage with two decimals: 0.01234 is "1.23%". */
export function formatPercent(share: number): string {
  return `${(share * 100).toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}%`;
}

/** A label cut to `max` characters, with an ellipsis. */
export function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, Math.max(1, max - 1))}…`;
}

/** A long platform id shortened to its last six characters, which tell items apart in a label. */
export function shortId(id: string): string {
  return id.length > 8 ? `…${id.slice(-6)}` : id;
}

/**
 * An item's address as a link target, or null: only http(s) addresses are links, so a stored
 * `javascript:` or `data:` URL can never become one.
 */
export function itemLink(url: string | null): string | null {
  if (url === null) return null;
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'https:' || parsed.protocol === 'http:' ? parsed.href : null;
  } catch {
    return null;
  }
}

const h = escapeHtml;

/** A count for a table cell, grouped, or a dash when there is none. */
export function number(value: number | null | undefined): string {
  return value === null || value === undefined ? '—' : h(formatNumber(value));
}

/** One section of the page: its anchor, title, description (HTML) and body (HTML). */
export function section(id: string, title: string, description: string, body: string): string {
  return `<section class="report-section" id="${h(id)}" aria-labelledby="${h(id)}-title">
<h2 id="${h(id)}-title">${h(title)}</h2>
<p class="description">${description}</p>
${body}
</section>`;
}

export const chartBox = (svg: string) => `<div class="chart-box">${svg}</div>`;

/** An item as a link to its page when it has an http(s) address, else as text; its caption, if given, as the tooltip. */
export function itemAnchor(url: string | null, text: string, caption?: string | null): string {
  const href = itemLink(url);
  const title = caption ? ` title="${h(truncate(caption, 200))}"` : '';
  return href === null ? `<span${title}>${h(text)}</span>` : `<a href="${h(href)}" rel="noopener noreferrer"${title}>${h(text)}</a>`;
}
