/**
 * Cursors and media links: both are tokens the emulator signs, so a client can neither forge nor
 * alter one, and both expire on the emulated clock. A cursor is bound to its request (the
 * endpoint and what it is about); a media link lives at most an hour.
 */
import { ApiError } from './api-error.js';
import { isoSeconds, type EmulatedClock } from './clock.js';
import { MAX_CURSOR_LENGTH, type Reply } from './http-io.js';
import type { SignedTokens } from './signed-token.js';

const MEDIA_URL_LIFETIME_MS = 3_600_000;

/**
 * Tiny valid-looking files for media links, one per item: an MP4 `ftyp` box and a `free` box
 * naming the item, or a JPEG's start marker, a comment naming the item, and its end marker.
 */
function mediaBytes(mimeType: string, entityId: string): Buffer {
  const name = Buffer.from(entityId);
  if (mimeType === 'image/jpeg') {
    const comment = Buffer.alloc(4);
    comment.writeUInt16BE(0xfffe, 0);
    comment.writeUInt16BE(name.length + 2, 2);
    return Buffer.concat([Buffer.from('ffd8ffe000104a46494600010100000100010000', 'hex'), comment, name, Buffer.from('ffd9', 'hex')]);
  }
  const free = Buffer.alloc(8);
  free.writeUInt32BE(name.length + 8, 0);
  free.write('free', 4);
  return Buffer.concat([Buffer.from('000000186674797069736f6d0000020069736f6d69736f32', 'hex'), free, name]);
}

export class CursorsAndMedia {
  constructor(
    private readonly tokens: SignedTokens,
    private readonly clock: EmulatedClock,
    /** The server's origin, known once it listens. */
    private readonly origin: () => string,
  ) {}

  writeCursor(scope: string, identity: string, position: unknown, expiresAtMs: number): string {
    return this.tokens.encode({ s: scope, i: identity, p: position, x: expiresAtMs });
  }

  readCursor(text: string, scope: string, identity: string, nowMs: number): unknown {
    if (text.length > MAX_CURSOR_LENGTH) {
      throw new ApiError(400, 'invalid_cursor', `the cursor is ${text.length} characters long, over the ${MAX_CURSOR_LENGTH} of any cursor this API issues`, 'cursor');
    }
    const payload = this.tokens.decode(text);
    if (!payload || payload.s !== scope || payload.i !== identity || typeof payload.x !== 'number') {
      throw new ApiError(400, 'invalid_cursor', `the cursor is malformed, altered, or belongs to another ${scope} request`, 'cursor');
    }
    if (payload.x <= nowMs) throw new ApiError(400, 'cursor_expired', 'the cursor has expired; start again from the first page', 'cursor');
    return payload.p;
  }

  /** A download's record with its media link; `expired` (a fault) gives one that expired a second ago. */
  signMedia(record: Record<string, unknown>, nowMs: number, expired = false): Record<string, unknown> {
    const expiresAtMs = Math.floor(nowMs / 1000) * 1000 + (expired ? -1000 : MEDIA_URL_LIFETIME_MS);
    const token = this.tokens.encode({ m: record.mime_type, e: record.entity_id, x: expiresAtMs });
    return {
      ...record,
      media_url: `${this.origin()}/_media/${token}`,
      expires_at: isoSeconds(expiresAtMs),
      warning: 'This media_url expires within 1 hour. Download the file promptly, or request this endpoint again for a new link.',
    };
  }

  media(token: string): Reply {
    const payload = this.tokens.decode(token);
    if (!payload || typeof payload.m !== 'string' || typeof payload.e !== 'string' || typeof payload.x !== 'number') throw new ApiError(404, 'media_not_found', 'no such media link');
    if (payload.x <= this.clock.now()) throw new ApiError(410, 'media_expired', 'this media link has expired; request the download endpoint again');
    return { status: 200, body: mediaBytes(payload.m, payload.e), contentType: payload.m };
  }
}
