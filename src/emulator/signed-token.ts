import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Opaque, signed tokens (cursors and media links): base64url JSON, a dot, and a truncated
 * HMAC-SHA256 over the exact encoded text, so changing any single character is detected.
 */
export class SignedTokens {
  constructor(private readonly secret: Buffer) {}

  encode(payload: object): string {
    const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
    return `${body}.${this.sign(body)}`;
  }

  /** The payload, or undefined when the token is malformed or its signature does not match. */
  decode(token: string): Record<string, unknown> | undefined {
    const dot = token.indexOf('.');
    if (dot <= 0) return undefined;
    const body = token.slice(0, dot);
    const given = Buffer.from(token.slice(dot + 1));
    const expected = Buffer.from(this.sign(body));
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    try {
      const payload: unknown = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
      return typeof payload === 'object' && payload !== null ? (payload as Record<string, unknown>) : undefined;
    } catch {
      return undefined;
    }
  }

  private sign(body: string): string {
    return createHmac('sha256', this.secret).update(body).digest('base64url').slice(0, 22);
  }
}
