/**
 * The emulated clock: wall-clock time plus whatever POST /_emulator/clock has added. Data
 * timestamps, cache ages and cursor expiry use it; webhook-timestamp uses the wall clock, because
 * receivers check it against theirs.
 */
export class EmulatedClock {
  private offsetMs = 0;

  now(): number {
    return Date.now() + this.offsetMs;
  }

  advance(seconds: number): void {
    this.offsetMs += seconds * 1000;
  }
}

export function isoSeconds(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}
