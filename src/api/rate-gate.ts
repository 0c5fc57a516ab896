/**
 * The API's rate limit, kept by the client: every request passes a gate, so however many calls
 * the runs put in flight, they go out at the pace the API allows instead of as a storm of 429s.
 *
 * One gate per API key and API in a process (`RateGate.of`): the API counts a key's requests
 * together, so every client of the key here (a worker's, its start-up key check's) paces against
 * one budget, and the runs a worker serves share it. Waiting requests are let through in turns by
 * caller (a run), so a run with many calls in flight does not crowd out one with few.
 *
 * The gate keeps an estimate of the API's token bucket, learnt from its answers: X-RateLimit-Limit
 * (tokens per second, and the bucket's size) and X-RateLimit-Remaining (what was left once the
 * request was counted). The estimate is kept at or below the API's own bucket: an answer's
 * remaining, less the requests let through after it (the API may count them after it), and no
 * refill counted for the time the answer took to come back. It refills at the limit, as the API's
 * does, so a gate that stays below the API's bucket sends at the full rate and is never refused.
 * A 429 closes the gate for its Retry-After. Until the first answer nothing is known: one request
 * goes at a time, so a cold start sends one request rather than a burst the API may refuse; an API
 * that sends no X-RateLimit headers is not held back at all.
 *
 * Hand-written: the limit is the server's, learnt from its headers as it goes, which the
 * token-bucket libraries (they count on their own clock, at a rate given up front) do not do.
 */
export class RateGate {
  private static readonly gates = new Map<string, RateGate>();

  /** The gate of one API key (its fingerprint) at one API origin, in this process. */
  static of(origin: string, keyFingerprint: string): RateGate {
    const key = `${origin} ${keyFingerprint}`;
    let gate = RateGate.gates.get(key);
    if (!gate) RateGate.gates.set(key, (gate = new RateGate()));
    return gate;
  }

  /** Requests per second, and the bucket's size, as the API last said; 0 while unknown. */
  private limit = 0;
  /** The estimate of the API's bucket: never above it. */
  private tokens = Number.POSITIVE_INFINITY;
  private refilledAtMs = Date.now();
  /** Whether any request has had an answer yet. */
  private heard = false;
  private inFlight = 0;
  /** Requests let through so far: each request's pass is its number among them. */
  private letThrough = 0;
  /** Closed until then by a 429's Retry-After. */
  private openAtMs = 0;
  /** Waiting requests by caller, callers in the order they take turns. */
  private readonly waiting = new Map<string, ((pass: number) => void)[]>();
  private waitingCount = 0;
  private timer: NodeJS.Timeout | undefined;

  /**
   * Lets a request through: its pass at once when it may go now (no promise on the hot path), or
   * a promise of its pass when its turn comes. Every pass must be ended with `answer` or `unsent`.
   */
  pass(caller = ''): number | Promise<number> {
    if (this.waitingCount === 0 && this.mayGo(Date.now())) return this.letGo();
    return new Promise((resolve) => {
      const queue = this.waiting.get(caller);
      if (queue) queue.push(resolve);
      else this.waiting.set(caller, [resolve]);
      this.waitingCount++;
      this.schedule(Date.now());
    });
  }

  /** Ends a pass with its request's answer (status and headers), or with none when no answer came. */
  answer(pass: number, status?: number, headers: Record<string, string | string[] | undefined> = {}): void {
    this.inFlight--;
    const now = Date.now();
    if (status !== undefined) this.heard = true;
    const limit = Number(first(headers['x-ratelimit-limit']));
    if (limit > 0) {
      this.refill(now);
      this.limit = limit;
      const remaining = Number(first(headers['x-ratelimit-remaining']));
      if (Number.isFinite(remaining)) this.tokens = Math.min(this.tokens, remaining - (this.letThrough - pass - 1));
    }
    if (status === 429) {
      const retryAfterSeconds = Number(first(headers['retry-after']));
      if (retryAfterSeconds > 0) this.openAtMs = Math.max(this.openAtMs, now + retryAfterSeconds * 1000);
    }
    this.release(now);
  }

  /** Ends a pass whose request never went out (its deadline passed while it waited): its token is given back. */
  unsent(): void {
    this.inFlight--;
    if (this.limit > 0) this.tokens = Math.min(this.limit, this.tokens + 1);
    this.release(Date.now());
  }

  private mayGo(now: number): boolean {
    if (now < this.openAtMs) return false;
    if (this.limit === 0) return this.heard || this.inFlight === 0;
    this.refill(now);
    return this.tokens >= 1;
  }

  private letGo(): number {
    this.inFlight++;
    if (this.limit > 0) this.tokens -= 1;
    return this.letThrough++;
  }

  /** Lets waiting requests through while they may go, a caller at a time in turn; then waits for the next token. */
  private release(now: number): void {
    while (this.waitingCount > 0 && this.mayGo(now)) {
      const [caller, queue] = this.waiting.entries().next().value as [string, ((pass: number) => void)[]];
      const resolve = queue.shift()!;
      // The caller goes to the back of the line, if it has more waiting.
      this.waiting.delete(caller);
      if (queue.length > 0) this.waiting.set(caller, queue);
      this.waitingCount--;
      resolve(this.letGo());
    }
    if (this.waitingCount > 0) this.schedule(now);
  }

  /** Wakes the waiting requests when the next token is due; while nothing is known, an answer wakes them. */
  private schedule(now: number): void {
    let delayMs: number;
    if (now < this.openAtMs) delayMs = this.openAtMs - now;
    else if (this.limit > 0) delayMs = Math.max(1, Math.ceil(((1 - this.tokens) / this.limit) * 1000));
    else return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.release(Date.now());
    }, delayMs);
  }

  private refill(now: number): void {
    if (this.limit > 0) this.tokens = Math.min(this.limit, this.tokens + ((now - this.refilledAtMs) / 1000) * this.limit);
    this.refilledAtMs = now;
  }
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
