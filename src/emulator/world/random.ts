/**
 * Deterministic randomness for the synthetic world. Every fact of the world is a pure function of
 * the seed and the names of what it describes, so nothing needs to be generated ahead or stored:
 * the world is lazy, start-up is instant and memory stays flat.
 */

/** FNV-1a over the parts, finished with murmur3's avalanche so neighbouring inputs spread out. */
export function hash32(seed: number, ...parts: readonly (string | number)[]): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (const part of parts) {
    const text = typeof part === 'number' ? part.toString(36) : part;
    for (let i = 0; i < text.length; i++) {
      h ^= text.charCodeAt(i);
      h = Math.imul(h, 0x01000193);
    }
    h ^= 0x1f; // part separator, so ('ab','c') and ('a','bc') differ
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** A number in [0, 1). */
export function unit(seed: number, ...parts: readonly (string | number)[]): number {
  return hash32(seed, ...parts) / 0x1_0000_0000;
}

/** A whole number in [min, max]. */
export function intBetween(min: number, max: number, seed: number, ...parts: readonly (string | number)[]): number {
  return min + Math.floor(unit(seed, ...parts) * (max - min + 1));
}

export function pick<T>(choices: readonly T[], seed: number, ...parts: readonly (string | number)[]): T {
  return choices[hash32(seed, ...parts) % choices.length] as T;
}

/** Log-uniform between min and max for a uniform u: most values small, a few very large. */
export function logUniform(min: number, max: number, u: number): number {
  return Math.exp(Math.log(min) + u * (Math.log(max) - Math.log(min)));
}

/** `digits` decimal digits from the hash of the parts (up to 15, within float precision). */
export function hashDigits(digits: number, seed: number, ...parts: readonly (string | number)[]): string {
  const high = hash32(seed, 'hi', ...parts) % 10 ** Math.min(digits, 8);
  const low = hash32(seed, 'lo', ...parts) % 10 ** Math.max(digits - 8, 0);
  const text = digits > 8 ? String(high).padStart(8, '0') + String(low).padStart(digits - 8, '0') : String(high).padStart(digits, '0');
  return text;
}

/** A seeded stream of numbers in [0, 1) (mulberry32), for choices that follow request order. */
export function randomStream(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 0x1_0000_0000;
  };
}
