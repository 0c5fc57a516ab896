/**
 * A proxy that stands between a client and the emulator and spoils answers on their way back,
 * after the emulator has served (and charged) them: bodies cut mid-way, headers held back, bodies
 * dripped a few bytes at a time, list pages with more items than asked for, items with empty ids,
 * answers about another item or account. It is how the harvester's distrust of what comes back is
 * tested, and how a user can watch a harvest meet a bad network before it meets the real API.
 * Which answers are spoiled, and how, is the caller's choice (`choose`), so cases are exact.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';

export type Corruption =
  /** The headers and part of the body, then the connection is destroyed. */
  | { kind: 'cut_body' }
  /** Nothing at all for `ms`, then the answer as it was. */
  | { kind: 'slow_headers'; ms: number }
  /** The headers at once, then the body `bytes` bytes every `everyMs`. */
  | { kind: 'slow_drip'; bytes: number; everyMs: number }
  /** A list page with each item twice, the copies under new ids: more items than `limit`. */
  | { kind: 'oversize' }
  /** A list page whose first item has an empty id. */
  | { kind: 'empty_id' }
  /** An object answer about another item (`entity_id`) or account (`handle`). */
  | { kind: 'other_entity' };

export interface ProxiedCall {
  method: string;
  /** The path and query, as the client sent them. */
  path: string;
  /** 1-based count of the calls the proxy has seen, in arrival order. */
  number: number;
}

export interface CorruptingProxyOptions {
  /** The emulator's origin, e.g. http://127.0.0.1:8787. */
  upstream: string;
  host?: string;
  port?: number;
  /** What to do to a call's answer; undefined passes it through unchanged. */
  choose: (call: ProxiedCall) => Corruption | undefined;
}

export interface CorruptingProxy {
  /** Origin the client should use as its base URL. */
  url: string;
  /** Calls whose answers were spoiled, by kind. */
  spoiled: Record<Corruption['kind'], number>;
  /** Replaces the choice, e.g. to let every answer through for a retry. */
  setChoice(choose: CorruptingProxyOptions['choose']): void;
  close(): Promise<void>;
}

/** Whether a call is a content call (a billed endpoint), not webhooks, jobs or the emulator's admin API. */
export function isContentCall(call: ProxiedCall): boolean {
  return /^\/v1\/(tiktok|instagram)\//.test(call.path);
}

export async function startCorruptingProxy(options: CorruptingProxyOptions): Promise<CorruptingProxy> {
  let choose = options.choose;
  let calls = 0;
  const spoiled: CorruptingProxy['spoiled'] = { cut_body: 0, slow_headers: 0, slow_drip: 0, oversize: 0, empty_id: 0, other_entity: 0 };
  const server: Server = createServer((req, res) => {
    const call: ProxiedCall = { method: req.method ?? 'GET', path: req.url ?? '/', number: ++calls };
    void forward(options.upstream, req, res, choose(call), spoiled).catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve));
  const address = server.address() as AddressInfo;
  return {
    url: `http://${address.address}:${address.port}`,
    spoiled,
    setChoice(next) {
      choose = next;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function forward(upstream: string, req: IncomingMessage, res: ServerResponse, corruption: Corruption | undefined, spoiled: CorruptingProxy['spoiled']): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const headers = { ...req.headers };
  delete headers.host;
  delete headers.connection;
  const answer = await request(`${upstream}${req.url ?? '/'}`, {
    method: (req.method ?? 'GET') as 'GET',
    headers,
    ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {}),
  });
  let body: Buffer = Buffer.from(await answer.body.arrayBuffer());
  const outHeaders: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(answer.headers)) {
    if (value !== undefined && name !== 'content-length' && name !== 'transfer-encoding' && name !== 'connection' && name !== 'keep-alive') outHeaders[name] = value;
  }
  // Only answers the emulator served whole are spoiled; a rewrite that does not fit the answer (an
  // empty page, say) leaves it as it was.
  let send = answer.statusCode === 200 ? corruption : undefined;
  if (send && REWRITES.has(send.kind)) {
    const rewritten = rewrite(body, send);
    if (rewritten) body = rewritten;
    else send = undefined;
  }
  if (send) spoiled[send.kind]++;
  if (send?.kind === 'slow_headers') await sleep(send.ms);
  res.writeHead(answer.statusCode, { ...outHeaders, 'content-length': String(body.length) });
  if (send?.kind === 'cut_body') {
    res.write(body.subarray(0, Math.floor(body.length / 2)));
    // Let the half reach the client before the connection goes.
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
    res.end();
    return;
  }
  res.end(body);
}

const REWRITES = new Set<Corruption['kind']>(['oversize', 'empty_id', 'other_entity']);

/** The answer's JSON changed as the corruption says, or undefined when it does not apply to this answer. */
function rewrite(body: Buffer, corruption: Corruption): Buffer | undefined {
  let envelope: { data?: unknown };
  try {
    envelope = JSON.parse(body.toString('utf8')) as { data?: unknown };
  } catch {
    return undefined;
  }
  const data = envelope.data;
  if (corruption.kind === 'oversize' && Array.isArray(data) && data.length > 0) {
    envelope.data = [...data, ...data.map((item: { id?: string }) => ({ ...item, id: `${item.id ?? ''}0` }))];
  } else if (corruption.kind === 'empty_id' && Array.isArray(data) && data.length > 0) {
    envelope.data = [{ ...(data[0] as object), id: '' }, ...data.slice(1)];
  } else if (corruption.kind === 'other_entity' && data && typeof data === 'object' && !Array.isArray(data)) {
    const object = data as { entity_id?: string; handle?: string };
    if (object.entity_id !== undefined) object.entity_id = `${object.entity_id}0`;
    else if (object.handle !== undefined) object.handle = `${object.handle}0`;
    else return undefined;
  } else {
    return undefined;
  }
  return Buffer.from(JSON.stringify(envelope));
}
