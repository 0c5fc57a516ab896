/**
 * A proxy between a client and the emulator that spoils answers on their way back, after the
 * emulator has served (and charged) them: bodies cut mid-way, headers held back, bodies dripped a
 * few bytes at a time, list pages with more items than asked for, items with empty ids, answers
 * about another item or account. The emulator's ledger stays the truth of what was charged. It is
 * how the harvester's distrust of what comes back is tested (tests and the fault matrix), and how
 * a user can watch a harvest meet a bad network before it meets the real API.
 *
 * Only content calls (/v1/tiktok/…, /v1/instagram/…) answered whole (200 or 202, JSON, not compressed)
 * are ever spoiled; webhooks, jobs and the emulator's /_emulator admin API pass through untouched.
 * Which answers are spoiled is the caller's `choose(call)`, given the call's 1-based number among
 * content calls and among calls of its endpoint: deterministic by count, so a case is repeatable.
 * A choice that does not fit the answer (an empty page, an error answer) passes it through
 * unchanged and is not counted.
 */
import { Agent, createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export type Corruption =
  /** The headers (with the full content-length) and `fraction` of the body (default half), then the socket is destroyed. */
  | { kind: 'cut_body'; fraction?: number }
  /** Nothing at all for `ms`, then the answer as it was. */
  | { kind: 'slow_headers'; ms: number }
  /** The headers at once, then the body `bytes` bytes every `everyMs`, until the client hangs up. */
  | { kind: 'slow_drip'; bytes: number; everyMs: number }
  /** A list page with each item twice, the copies under new ids (and URLs): more items than `limit`. */
  | { kind: 'oversize' }
  /** A list page whose item `index` (default 0) has the id "". */
  | { kind: 'empty_id'; index?: number }
  /**
   * An object answer about another entity: a stats-like answer's `entity_id` set to the previous
   * item of its platform the proxy saw, a profile's `handle` to another of `otherHandles`.
   */
  | { kind: 'other_entity' }
  /**
   * Text that is not well-formed Unicode: a NUL and a lone surrogate (`\u0000`, `\ud800`, as JSON
   * escapes JavaScript's parser accepts) in a list page's first item's caption (or text), or in an
   * object answer's `author.name` (or `name`, `text`, `summary`).
   */
  | { kind: 'bad_text' }
  /** An object answer whose `posted_at` has the form of a time and is none (`2026-13-45T99:99:99Z`). */
  | { kind: 'impossible_time' };

export type CorruptionKind = Corruption['kind'];
export const CORRUPTION_KINDS: readonly CorruptionKind[] = ['cut_body', 'slow_headers', 'slow_drip', 'oversize', 'empty_id', 'other_entity', 'bad_text', 'impossible_time'];
const REWRITES = new Set<CorruptionKind>(['oversize', 'empty_id', 'other_entity', 'bad_text', 'impossible_time']);
/** What `bad_text` puts in the middle of a text. */
export const BAD_TEXT = 'nul:\u0000 surrogate:\ud800 end';
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'proxy-connection', 'upgrade']);

/** A content call on its way through. */
export interface ProxiedCall {
  /** 1-based, among the content calls the proxy has seen, in arrival order. */
  number: number;
  /** 1-based, among the calls of its endpoint. */
  endpointNumber: number;
  /** `platform/name`, e.g. `tiktok/stats`. */
  endpoint: string;
  method: string;
  /** The path and query, as the client sent them. */
  path: string;
  query: URLSearchParams;
}

/** An answer the proxy spoiled, with what the emulator said of it. */
export interface SpoiledCall {
  number: number;
  kind: CorruptionKind;
  endpoint: string;
  query: Record<string, string>;
  requestId: string | undefined;
  credits: number;
}

export interface CorruptingProxyOptions {
  /** The emulator's origin, e.g. http://127.0.0.1:8787. */
  upstream: string;
  host?: string;
  port?: number;
  /** What to do to a content call's answer; undefined passes it through unchanged. */
  choose?: (call: ProxiedCall) => Corruption | undefined;
  /** Accounts a profile answer may be made about instead, per platform. */
  otherHandles?: Partial<Record<string, readonly string[]>>;
}

export interface CorruptingProxy {
  origin: string;
  /** What a client's base URL should be: the origin and /v1. */
  baseUrl: string;
  /** Content calls forwarded (each served, and charged, by the emulator). */
  readonly forwarded: number;
  /** Answers spoiled, by kind. */
  spoiled: Record<CorruptionKind, number>;
  spoiledCalls: SpoiledCall[];
  setChoice(choose: NonNullable<CorruptingProxyOptions['choose']>): void;
  /** Lets every answer through unchanged from now on (answers being held or dripped go on). */
  passThrough(): void;
  close(): Promise<void>;
}

/** The content endpoint of a path (`tiktok/stats`), or undefined for any other call. */
export function contentEndpoint(path: string): string | undefined {
  const match = /^\/v1\/(tiktok|instagram)\/([a-z-]+)(?:[/?]|$)/.exec(path);
  return match ? `${match[1]}/${match[2]}` : undefined;
}

type Envelope = { data?: unknown };
type ListItem = { id?: unknown; url?: unknown };

/** What one proxy keeps across the calls it forwards. */
interface ProxyState {
  target: URL;
  agent: Agent;
  otherHandles: CorruptingProxyOptions['otherHandles'];
  /** Content calls forwarded (each served, and charged, by the emulator). */
  forwarded: number;
  /** The last item id seen in an answer, per platform: what an `other_entity` answer is made about. */
  lastEntity: Map<string, string>;
  spoiled: Record<CorruptionKind, number>;
  spoiledCalls: SpoiledCall[];
}

export async function startCorruptingProxy(options: CorruptingProxyOptions): Promise<CorruptingProxy> {
  const state: ProxyState = {
    target: new URL(options.upstream),
    agent: new Agent({ keepAlive: true, maxSockets: 256 }),
    otherHandles: options.otherHandles,
    forwarded: 0,
    lastEntity: new Map(),
    spoiled: Object.fromEntries(CORRUPTION_KINDS.map((kind) => [kind, 0])) as Record<CorruptionKind, number>,
    spoiledCalls: [],
  };
  let choose = options.choose ?? (() => undefined);
  let contentCalls = 0;
  const perEndpoint = new Map<string, number>();
  const sockets = new Set<Socket>();

  const server = createServer((req, res) => {
    const path = req.url ?? '/';
    const endpoint = contentEndpoint(path);
    let call: ProxiedCall | undefined;
    if (endpoint) {
      const count = (perEndpoint.get(endpoint) ?? 0) + 1;
      perEndpoint.set(endpoint, count);
      call = { number: ++contentCalls, endpointNumber: count, endpoint, method: req.method ?? 'GET', path, query: new URL(path, 'http://proxy').searchParams };
    }
    forward(state, req, res, call, call ? choose(call) : undefined).catch(() => res.destroy());
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.keepAliveTimeout = 30_000;

  await new Promise<void>((resolve) => server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve));
  const address = server.address() as AddressInfo;
  const origin = `http://${address.address}:${address.port}`;
  return {
    origin,
    baseUrl: `${origin}/v1`,
    get forwarded() {
      return state.forwarded;
    },
    spoiled: state.spoiled,
    spoiledCalls: state.spoiledCalls,
    setChoice(next) {
      choose = next;
    },
    passThrough() {
      choose = () => undefined;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      state.agent.destroy();
    },
  };
}

/** Forwards one request to the emulator and its answer back, spoiled as `corruption` says where it fits. */
async function forward(state: ProxyState, req: IncomingMessage, res: ServerResponse, call: ProxiedCall | undefined, corruption: Corruption | undefined): Promise<void> {
  const answer = await askUpstream(state, req);
  if (call) state.forwarded++;
  let body = answer.body;
  // A success: 200, or 202 for a job started.
  const served = answer.status === 200 || answer.status === 202;
  const whole = served && !answer.headers['content-encoding'] && /json/.test(String(answer.headers['content-type'] ?? ''));
  let envelope: Envelope | undefined;
  let previousEntity: string | undefined;
  if (call && whole) {
    try {
      envelope = JSON.parse(body.toString('utf8')) as Envelope;
    } catch {
      envelope = undefined;
    }
    previousEntity = remember(state.lastEntity, call, envelope?.data);
  }
  let send = call && served ? corruption : undefined;
  if (send && REWRITES.has(send.kind)) {
    const rewritten = envelope && call ? rewrite(call, envelope, send, previousEntity, state.otherHandles) : undefined;
    if (rewritten) body = rewritten;
    else send = undefined;
  }
  if (send && call) {
    state.spoiled[send.kind]++;
    const requestId = answer.headers['x-request-id'];
    state.spoiledCalls.push({
      number: call.number,
      kind: send.kind,
      endpoint: call.endpoint,
      query: Object.fromEntries(call.query),
      requestId: Array.isArray(requestId) ? requestId[0] : requestId,
      credits: Number(answer.headers['x-credits-charged'] ?? 0),
    });
  }
  await writeAnswer(res, answer.status, answer.headers, body, send);
}

/** The emulator's answer to the request, read whole, without its hop-by-hop headers. */
async function askUpstream(state: ProxyState, req: IncomingMessage): Promise<{ status: number; headers: Record<string, string | string[]>; body: Buffer }> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const headers = { ...req.headers, host: state.target.host };
  delete headers.connection;
  const answer = await new Promise<IncomingMessage>((resolve, reject) => {
    const upstream = httpRequest({ host: state.target.hostname, port: state.target.port, method: req.method, path: req.url, headers, agent: state.agent }, resolve);
    upstream.once('error', reject);
    upstream.end(chunks.length > 0 ? Buffer.concat(chunks) : undefined);
  });
  const parts: Buffer[] = [];
  for await (const chunk of answer) parts.push(chunk as Buffer);
  const kept: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(answer.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) kept[name] = value;
  return { status: answer.statusCode ?? 502, headers: kept, body: Buffer.concat(parts) };
}

/** Writes the answer to the client, held back, cut or dripped as `send` says. */
async function writeAnswer(res: ServerResponse, status: number, headers: Record<string, string | string[]>, body: Buffer, send: Corruption | undefined): Promise<void> {
  if (res.destroyed) return;
  if (send?.kind === 'slow_headers') {
    await sleep(send.ms);
    if (res.destroyed) return;
  }
  res.writeHead(status, { ...headers, 'content-length': String(body.length) });
  if (send?.kind === 'cut_body') {
    res.write(body.subarray(0, Math.max(1, Math.floor(body.length * (send.fraction ?? 0.5)))));
    // Let the part reach the client before the connection goes.
    await sleep(20);
    res.destroy();
    return;
  }
  if (send?.kind === 'slow_drip') {
    for (let offset = 0; offset < body.length; offset += send.bytes) {
      if (res.destroyed) return;
      res.write(body.subarray(offset, offset + send.bytes));
      await sleep(send.everyMs);
    }
    if (!res.destroyed) res.end();
    return;
  }
  res.end(body);
}

/** Remembers the item an answer is about; returns the one remembered before it, of the same platform. */
function remember(lastEntity: Map<string, string>, call: ProxiedCall, data: unknown): string | undefined {
  const platform = call.endpoint.split('/')[0] as string;
  const previous = lastEntity.get(platform);
  if (Array.isArray(data)) {
    const last = data.at(-1) as ListItem | undefined;
    if (typeof last?.id === 'string' && last.id !== '') lastEntity.set(platform, last.id);
  } else if (data && typeof data === 'object' && typeof (data as { entity_id?: unknown }).entity_id === 'string') {
    lastEntity.set(platform, (data as { entity_id: string }).entity_id);
  }
  return previous;
}

/** The envelope with the corruption applied, as bytes; undefined when it does not fit the answer. */
function rewrite(call: ProxiedCall, envelope: Envelope, corruption: Corruption, previousEntity: string | undefined, otherHandles: CorruptingProxyOptions['otherHandles']): Buffer | undefined {
  const data = envelope.data;
  const platform = call.endpoint.split('/')[0] as string;
  if (corruption.kind === 'oversize' && Array.isArray(data) && data.length > 0) {
    const copies = (data as ListItem[]).map((item) => {
      const id = otherId(item.id);
      return { ...item, id, ...(typeof item.url === 'string' && typeof item.id === 'string' ? { url: item.url.replace(item.id, id) } : {}) };
    });
    envelope.data = [...data, ...copies];
  } else if (corruption.kind === 'empty_id' && Array.isArray(data) && data.length > 0) {
    const index = Math.min(corruption.index ?? 0, data.length - 1);
    envelope.data = (data as ListItem[]).map((item, at) => (at === index ? { ...item, id: '' } : item));
  } else if (corruption.kind === 'other_entity' && data && typeof data === 'object' && !Array.isArray(data)) {
    const object = data as { entity_id?: unknown; handle?: unknown };
    if (typeof object.entity_id === 'string') {
      object.entity_id = previousEntity !== undefined && previousEntity !== object.entity_id ? previousEntity : otherId(object.entity_id);
    } else if (typeof object.handle === 'string') {
      const asked = object.handle.toLowerCase();
      object.handle = (otherHandles?.[platform] ?? []).find((handle) => handle.toLowerCase() !== asked) ?? `${object.handle}0`;
    } else return undefined;
  } else if (corruption.kind === 'bad_text' || corruption.kind === 'impossible_time') {
    if (!spoilText(data, corruption.kind)) return undefined;
  } else {
    return undefined;
  }
  return Buffer.from(JSON.stringify(envelope));
}

/** An impossible time of the API's form: month 13, hour 99. */
export const IMPOSSIBLE_TIME = '2026-13-45T99:99:99Z';

/** Spoils an answer's data in place as `bad_text` or `impossible_time` says; false when it has no field for it. */
function spoilText(data: unknown, kind: 'bad_text' | 'impossible_time'): boolean {
  const target = (Array.isArray(data) ? data[0] : data) as Record<string, unknown> | undefined;
  if (!target || typeof target !== 'object') return false;
  if (kind === 'impossible_time') {
    if (Array.isArray(data) || typeof target.posted_at !== 'string') return false;
    target.posted_at = IMPOSSIBLE_TIME;
    return true;
  }
  const author = target.author as Record<string, unknown> | undefined;
  const holder = typeof author?.name === 'string' ? author : target;
  const field = ['caption', 'text', 'name', 'summary'].find((name) => typeof holder[name] === 'string');
  if (!field) return false;
  const text = holder[field] as string;
  holder[field] = `${text.slice(0, 8)}${BAD_TEXT}${text.slice(8)}`;
  return true;
}

/** A different id of the same shape: its last character changed (a digit stays a digit). */
function otherId(id: unknown): string {
  if (typeof id !== 'string' || id === '') return 'x0';
  const last = id.at(-1) as string;
  const next = /\d/.test(last) ? String((Number(last) + 1) % 10) : last === 'z' ? 'a' : last === 'Z' ? 'A' : /[a-yA-Y]/.test(last) ? String.fromCharCode(last.charCodeAt(0) + 1) : '0';
  return `${id.slice(0, -1)}${next}`;
}
