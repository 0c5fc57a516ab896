/**
 * Text the API sent that is not well-formed Unicode, repaired before it is kept: a lone surrogate
 * (`\ud800` without its pair) and a NUL become U+FFFD, and each repair is recorded with the field
 * it was in and the code units it replaced.
 *
 * Why: JavaScript's JSON parser accepts a lone surrogate, and JSON.stringify writes it back as the
 * escape `\ud800`; DuckDB's JSON reader refuses the whole answer ("Malformed JSON: no low surrogate
 * in string"), so the answer, bought and counted as landed, never reached the lake. A NUL (`\u0000`)
 * is read by DuckDB 1.5.5 into a VARCHAR and kept there, but it cannot be kept everywhere the text
 * goes: PostgreSQL's text refuses it (a shared lake's catalog keeps column statistics there), and
 * C strings, CSV exports and terminals cut the text at it. U+FFFD is Unicode's own "a character
 * was here that could not be kept".
 */

/** One field's repair: where it was (`data[3].caption`), and the code units replaced, in order (`U+D800`, `U+0000`). */
export interface TextRepair {
  path: string;
  replaced: string[];
}

/**
 * Whether a JSON text may hold a string that needs repair: JSON.stringify writes a lone surrogate
 * and a NUL only as `\uXXXX` escapes (d800–dfff, 0000), and everything else it writes as itself
 * (control characters other than NUL as escapes too, which this also matches, and which the repair
 * leaves alone). A scan without parsing: the common answer has none and costs no more.
 */
export function mayNeedRepair(json: string): boolean {
  return json.includes('\\u') && /\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})/.test(json);
}

const REPLACEMENT = '\uFFFD';

/**
 * The string with each lone surrogate and NUL replaced by U+FFFD; the code units it replaced, in
 * order. By hand rather than String.prototype.toWellFormed (Node 20): that one says nothing of what
 * it replaced, and leaves NUL.
 */
export function repairString(text: string): { text: string; replaced: string[] } {
  // Any surrogate or NUL at all (paired surrogates too): the common string has none and is returned as it is.
  if (!/[\ud800-\udfff\0]/.test(text)) return { text, replaced: [] };
  const replaced: string[] = [];
  let repaired = '';
  for (let index = 0; index < text.length; index++) {
    const unit = text.charCodeAt(index);
    const isHigh = unit >= 0xd800 && unit <= 0xdbff;
    const isLow = unit >= 0xdc00 && unit <= 0xdfff;
    const next = text.charCodeAt(index + 1);
    if (isHigh && next >= 0xdc00 && next <= 0xdfff) {
      repaired += text.slice(index, index + 2);
      index++;
    } else if (isHigh || isLow || unit === 0) {
      replaced.push(`U+${unit.toString(16).toUpperCase().padStart(4, '0')}`);
      repaired += REPLACEMENT;
    } else {
      repaired += text[index];
    }
  }
  return { text: repaired, replaced };
}

/** A member's path below `parent`, as JavaScript would write it (`data[3].caption`, `data["a b"]`). */
function memberPath(parent: string, name: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name) ? `${parent}.${name}` : `${parent}[${JSON.stringify(name)}]`;
}

/**
 * A parsed JSON value with every string (and member name) repaired, the repairs pushed onto
 * `repairs` under `path`. Values without anything to repair are returned as they are.
 */
export function repairValue(value: unknown, path: string, repairs: TextRepair[]): unknown {
  if (typeof value === 'string') {
    const { text, replaced } = repairString(value);
    if (replaced.length > 0) repairs.push({ path, replaced });
    return text;
  }
  if (Array.isArray(value)) return value.map((element, index) => repairValue(element, `${path}[${index}]`, repairs));
  if (value === null || typeof value !== 'object') return value;
  const repaired: Record<string, unknown> = {};
  for (const [name, member] of Object.entries(value)) {
    const key = repairString(name);
    if (key.replaced.length > 0) repairs.push({ path: `${memberPath(path, key.text)} (its name)`, replaced: key.replaced });
    repaired[key.text] = repairValue(member, memberPath(path, key.text), repairs);
  }
  return repaired;
}
