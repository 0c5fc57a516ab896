import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError } from './api-error.js';

/** What a route answers; the server adds the common headers and writes it. */
export interface Reply {
  status: number;
  /** A JSON value (serialized), a string, or bytes; none for a 204. */
  json?: unknown;
  body?: string | Buffer;
  contentType?: string;
  headers?: Record<string, string>;
}

const MAX_BODY_BYTES = 1 << 20;

/**
 * The longest request head (request line and headers) the server reads. Node's default, 16 KiB,
 * makes it drop longer URLs with a reset the client cannot read; this one leaves room for the
 * limits below to be answered as API errors. Above it Node answers 431 and closes the connection.
 */
export const MAX_REQUEST_HEAD_BYTES = 1 << 20;

/**
 * The longest request target (path and query) answered, not counting the `cursor` parameter,
 * which is checked as a cursor (MAX_CURSOR_LENGTH) so that clients recover from it as from any
 * bad cursor. Above it: 414 uri_too_long.
 */
export const MAX_URL_BYTES = 16 * 1024;

/**
 * The longest cursor read. The emulator's own cursors stay far below it: they carry the search
 * query, itself bounded by MAX_URL_BYTES, in base64url. A longer one is 400 invalid_cursor
 * without being decoded.
 */
export const MAX_CURSOR_LENGTH = 32 * 1024;

/** 414 when the request target, less its cursor, is over MAX_URL_BYTES. */
export function checkUrlLength(rawUrl: string, url: URL): void {
  if (rawUrl.length <= MAX_URL_BYTES) return;
  const withoutCursor = new URL(url);
  withoutCursor.searchParams.delete('cursor');
  const length = withoutCursor.pathname.length + withoutCursor.search.length;
  if (length > MAX_URL_BYTES) {
    throw new ApiError(414, 'uri_too_long', `the request URL is ${length} bytes long without its cursor; at most ${MAX_URL_BYTES} are answered`);
  }
}

export async function readJsonBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const contentType = req.headers['content-type'] ?? '';
  if (!/^application\/json\b/i.test(contentType)) {
    throw new ApiError(415, 'unsupported_media_type', `the request body must be sent with Content-Type: application/json, got ${JSON.stringify(contentType)}`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new ApiError(413, 'body_too_large', `the request body is over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (error) {
    throw new ApiError(400, 'invalid_json', `the request body is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ApiError(400, 'invalid_json', 'the request body must be a JSON object');
  }
  return parsed as Record<string, unknown>;
}

export function writeReply(res: ServerResponse, reply: Reply, headers: Record<string, string>): void {
  const all: Record<string, string> = { ...headers, ...reply.headers };
  let body: string | Buffer | undefined = reply.body;
  if (reply.json !== undefined) {
    body = JSON.stringify(reply.json);
    all['content-type'] = 'application/json; charset=utf-8';
  } else if (reply.contentType) {
    all['content-type'] = reply.contentType;
  }
  if (body !== undefined) all['content-length'] = String(Buffer.byteLength(body));
  res.writeHead(reply.status, all);
  res.end(reply.status === 204 ? undefined : body);
}

export function errorReply(error: ApiError, requestId: string): Reply {
  return {
    status: error.status,
    json: {
      error: { code: error.code, message: error.message, ...(error.param ? { param: error.param } : {}), ...error.extra },
      request_id: requestId,
    },
    headers: error.headers,
  };
}

export function isLoopback(address: string | undefined): boolean {
  return address !== undefined && (address.startsWith('127.') || address === '::1' || address.startsWith('::ffff:127.'));
}
