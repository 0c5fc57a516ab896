/**
 * The chaos soak's invariants (bench/chaos-soak.mjs), checked after each run and its retry, from
 * what the world held, the emulator's ledger and the warehouse:
 *
 *   items-once      every expected item is in the warehouse exactly once. The world's channels gain
 *                   posts as time goes (src/emulator/world/world.ts, from half an interval after the
 *                   emulator started), so the expected items are read before the run and after it:
 *                   an item among the first ITEMS both times must be there
 *   no-invented     no item outside the first ITEMS of the targets, before or after the run
 *   credits         ledger <= reported; reported - ledger <= calls counted as lost x the dearest
 *                   call's worst case; the warehouse's api_calls credits <= ledger; ledger calls not
 *                   in api_calls <= calls counted as lost + the calls in flight at the faults (a
 *                   frozen attempt's answers and its successor's are both charged and counted) +
 *                   the answers the proxy cut or spoiled
 *   re-paid         calls counted as lost <= the calls in flight at the kills, freezes and outages
 *                   (targets + calls in flight, per fault) + the answers the proxy cut or spoiled
 *   budget          ledger <= the run's budget (and its retry's)
 *   honest-status   `completed` exactly when every expected item is there
 *   fault-status    a run whose disk filled ends `failed`, and one with an answer the client had to
 *                   refuse does not end `completed`, before the retry
 */
import { IN_FLIGHT_FAULTS, REFUSED_KINDS } from './faults.mjs';

/** The world's items of the run's channels up to `items`, read with the verification client. */
export async function worldItems(client, channels, items) {
  const ids = new Set();
  for (const [platform, handle, , endpoint] of channels) {
    for await (const page of client.pages(platform, endpoint, { handle }, { maxItems: items })) for (const item of page.items) ids.add(`${platform}:${item.id}`);
  }
  return ids;
}

/** The warehouse's rows the checks read, and the listing pages for a violation's diagnosis. */
export async function warehouseRows(query) {
  return {
    items: (await query('SELECT platform, item_id FROM items')).rows.map((row) => `${row.platform}:${row.item_id}`),
    apiCalls: (await query('SELECT request_id, credits FROM api_calls')).rows,
    // Parsed here, not in SQL: DuckDB may cast a row's field before the filter that leaves the row out.
    pages: (await query("SELECT CAST(answer AS VARCHAR) AS answer, request_id FROM raw_answers WHERE kind = 'page'")).rows
      .map((row) => ({ ...JSON.parse(row.answer), request_id: row.request_id }))
      .filter((answer) => String(answer.target).startsWith('channel:'))
      .map((answer) => ({ target: answer.target, page: answer.page, rank_offset: answer.rank_offset, items: Array.isArray(answer.data) ? answer.data.length : 0, request_id: answer.request_id }))
      .sort((a, b) => a.target.localeCompare(b.target) || a.page - b.page),
  };
}

/**
 * The violations of one run. `world` is { before, after } (sets of ids), `ledger` the run's rows of
 * the emulator's ledger, `summary` its final summary, `first` the status before any retry, `spoiled`
 * the kinds of the answers the proxy spoiled during the run (an answer spoiled as a fault ended counts too).
 */
export function violationsOf({ world, rows, ledger, summary, first, retried, faults, spoiled: spoiledKinds, limits }) {
  const must = new Set([...world.before].filter((id) => world.after.has(id)));
  const allowed = new Set([...world.before, ...world.after]);
  const charged = ledger.reduce((sum, row) => sum + row.credits, 0);
  const landed = new Set(rows.apiCalls.map((row) => String(row.request_id)));
  const landedCredits = rows.apiCalls.reduce((sum, row) => sum + Number(row.credits), 0);
  const paidNotLanded = ledger.filter((row) => !landed.has(row.request_id)).length;
  const distinct = new Set(rows.items);
  const missing = [...must].filter((id) => !distinct.has(id));
  const invented = [...distinct].filter((id) => !allowed.has(id));
  const lost = summary.callsLost ?? 0;
  const reported = summary.creditsSpent;
  const inFlight = faults.filter((fault) => IN_FLIGHT_FAULTS.has(fault.kind)).length * limits.inFlight;
  const spoiled = spoiledKinds.length;
  const violations = [];
  if (rows.items.length !== distinct.size) violations.push(`items-once: ${rows.items.length - distinct.size} duplicate rows`);
  if (missing.length > 0) violations.push(`items-once: ${missing.length} expected items missing (${missing.slice(0, 3).join(', ')})`);
  if (invented.length > 0) violations.push(`no-invented: ${invented.length} items the targets do not have (${invented.slice(0, 3).join(', ')})`);
  if (reported < charged) violations.push(`credits: reported ${reported} < ledger ${charged}`);
  if (reported - charged > lost * limits.dearestCall) violations.push(`credits: reported ${reported} - ledger ${charged} > ${lost} lost calls x ${limits.dearestCall}`);
  if (landedCredits > charged) violations.push(`credits: api_calls ${landedCredits} > ledger ${charged}`);
  if (paidNotLanded > lost + inFlight + spoiled) violations.push(`credits: ${paidNotLanded} charged calls not in api_calls > ${lost} counted as lost + ${inFlight} in flight at the faults + ${spoiled} spoiled`);
  if (lost > inFlight + spoiled) violations.push(`re-paid: ${lost} calls lost > ${inFlight} in flight at the faults + ${spoiled} spoiled`);
  const budget = limits.budget * (retried ? 2 : 1);
  if (charged > budget) violations.push(`budget: ledger ${charged} > ${budget}`);
  const complete = missing.length === 0 && invented.length === 0 && rows.items.length === distinct.size;
  if ((summary.status === 'completed') !== complete) violations.push(`honest-status: ${summary.status} with ${complete ? 'every' : 'not every'} expected item`);
  if (faults.some((fault) => fault.kind === 'disk-full') && first !== 'failed') violations.push(`fault-status: ${first} with its disk full`);
  const refused = spoiledKinds.filter((kind) => REFUSED_KINDS.includes(kind)).length;
  if (refused > 0 && first === 'completed') violations.push(`fault-status: completed over ${refused} refused answers`);
  const notLanded = ledger.filter((row) => !landed.has(row.request_id)).map((row) => `${row.at} ${row.endpoint} ${row.credits}`);
  return { violations, charged, reported, landedCredits, lost, distinct: distinct.size, expected: must.size, missing, invented, notLanded };
}

/** What a violation's reader needs: the listing pages the warehouse holds, per target, and the calls charged and not landed. */
export function diagnosis(rows, figures) {
  const pages = rows.pages.map((row) => `  ${row.target} p${row.page} offset ${row.rank_offset} items ${row.items} ${row.request_id}`);
  return [...pages, `  charged, not in api_calls (${figures.notLanded.length}):`, ...figures.notLanded.map((line) => `    ${line}`)].join('\n');
}
