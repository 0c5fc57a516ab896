/**
 * What an emulator running in this process serves, as its HTTP server sees it (node:http's
 * diagnostics channels): how many requests it answered with each status, and the most it was
 * answering at once. Counts only requests whose path starts with `pathPrefix`.
 */
import diagnostics from 'node:diagnostics_channel';
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface ServedRequests {
  byStatus: Map<number, number>;
  /** The most requests the server was answering at once. */
  mostAtOnce: number;
  /** Forgets what was counted so far. */
  reset(): void;
  stop(): void;
}

export function watchServedRequests(pathPrefix: string): ServedRequests {
  let open = 0;
  const served: ServedRequests = {
    byStatus: new Map(),
    mostAtOnce: 0,
    reset() {
      served.byStatus.clear();
      served.mostAtOnce = open;
    },
    stop() {
      diagnostics.unsubscribe('http.server.request.start', onStart);
      diagnostics.unsubscribe('http.server.response.finish', onFinish);
    },
  };
  const ours = (message: unknown) => (message as { request: IncomingMessage }).request.url?.startsWith(pathPrefix) ?? false;
  const onStart = (message: unknown) => {
    if (!ours(message)) return;
    open++;
    served.mostAtOnce = Math.max(served.mostAtOnce, open);
  };
  const onFinish = (message: unknown) => {
    if (!ours(message)) return;
    open--;
    const status = (message as { response: ServerResponse }).response.statusCode;
    served.byStatus.set(status, (served.byStatus.get(status) ?? 0) + 1);
  };
  diagnostics.subscribe('http.server.request.start', onStart);
  diagnostics.subscribe('http.server.response.finish', onFinish);
  return served;
}
