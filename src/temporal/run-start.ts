/**
 * Starting a run: over Temporal's HTTP API where there is one, else through the gRPC client.
 *
 * Why HTTP: the gRPC client (@temporalio/client with its protobuf reflection and grpc-js) takes
 * 0.3–0.5 s of CPU to import on a 2-core machine, about half of `harvester run --no-local-worker`'s
 * start; a run's start is one small request, which Node's own `http` sends in a few milliseconds.
 * The client is still loaded to follow the run, but after it has started, beside its first tasks.
 * The request is written here (Temporal's HTTP API is its gRPC API in JSON; no npm client for it is
 * lighter than the SDK). Its payloads go as the SDK's default converter writes them, `json/plain`
 * with the bytes of JSON.stringify, in the API's canonical form (`application/json+no-payload-shorthand`):
 * the API's shorthand (arguments as JSON values) goes through the server's JSON, which turned an empty
 * list into null, and a run's harvest with no comment targets failed its first workflow task.
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { TemporalSettings } from './settings.js';
import { socketErrorReason } from './socket-reason.js';

/** What starts a run: its workflow and what it is given. */
export interface RunStart {
  workflowId: string;
  workflowType: string;
  taskQueue: string;
  /** The run's one-line summary in Temporal's UI. */
  summary: string;
  /** The workflow's arguments, JSON values (the SDK's default converter's `json/plain`). */
  args: unknown[];
}

/** How a run was started, and its run id (unknown when a start over HTTP whose answer was lost had made it). */
export interface StartedRun {
  runId: string | undefined;
  over: 'http' | 'grpc';
}

/** How long the HTTP start may take before the gRPC client starts the run instead (its own connect timeout). */
const HTTP_START_DEADLINE_MS = 10_000;

/** Temporal answered the start over HTTP with an error of its own (a namespace it does not know, a key it refuses). */
export class TemporalStartRefusedError extends Error {
  override readonly name = 'TemporalStartRefusedError';
}

/**
 * Starts the run. Over HTTP when `settings.http` names Temporal's HTTP API; when that does not
 * answer as Temporal (refused, timed out, cut, or something else at that address), through the
 * gRPC client that `connect` gives, which is also how a run starts without an HTTP API. The
 * workflow id is this run's alone (the CLI makes it), so a run the lost HTTP attempt did start is
 * known by the gRPC start's "already started", and followed, never started twice. `warn` is told
 * when a named HTTP API did not answer.
 */
export async function startRunExecution(settings: TemporalSettings, start: RunStart, connect: () => Promise<Client>, warn: (line: string) => void): Promise<StartedRun> {
  if (settings.http) {
    const outcome = await startOverHttp(settings, start).catch((error: unknown) => {
      if (error instanceof TemporalStartRefusedError) throw error;
      return error instanceof Error ? error : new Error(String(error));
    });
    if (!(outcome instanceof Error)) return { runId: outcome, over: 'http' };
    if (settings.http.named) warn(`warning: Temporal's HTTP API at ${settings.http.origin} (TEMPORAL_HTTP_ADDRESS) did not answer (${outcome.message}); starting the run through ${settings.address}`);
  }
  const client = await connect();
  try {
    const handle = await client.workflow.start(start.workflowType, { taskQueue: start.taskQueue, workflowId: start.workflowId, staticSummary: start.summary, args: start.args });
    return { runId: handle.firstExecutionRunId, over: 'grpc' };
  } catch (error) {
    // Only the HTTP attempt can have started a workflow of this id: it is this run's.
    const { WorkflowExecutionAlreadyStartedError } = await import('@temporalio/client');
    if (settings.http && error instanceof WorkflowExecutionAlreadyStartedError) return { runId: undefined, over: 'http' };
    throw error;
  }
}

/** The media type of Temporal's HTTP API for payloads in their proto form (metadata and data in base64), not its shorthand. */
const CANONICAL_JSON = 'application/json+no-payload-shorthand';

/** A value as the SDK's default payload converter writes it (json/plain), in proto JSON. */
function jsonPayload(value: unknown): { metadata: { encoding: string }; data: string } {
  return { metadata: { encoding: Buffer.from('json/plain').toString('base64') }, data: Buffer.from(JSON.stringify(value)).toString('base64') };
}

/** One StartWorkflowExecution over Temporal's HTTP API: the run id, or why not. */
async function startOverHttp(settings: TemporalSettings, start: RunStart): Promise<string> {
  const { origin } = settings.http!;
  const url = new URL(`/api/v1/namespaces/${encodeURIComponent(settings.namespace)}/workflows/${encodeURIComponent(start.workflowId)}`, origin);
  const body = JSON.stringify({
    workflowType: { name: start.workflowType },
    taskQueue: { name: start.taskQueue, kind: 'TASK_QUEUE_KIND_NORMAL' },
    input: { payloads: start.args.map(jsonPayload) },
    identity: `${process.pid}@${hostname()}`,
    requestId: randomUUID(),
    userMetadata: { summary: jsonPayload(start.summary) },
  });
  const headers: Record<string, string> = { 'content-type': CANONICAL_JSON, accept: CANONICAL_JSON, 'content-length': String(Buffer.byteLength(body)) };
  if (settings.apiKey) headers.authorization = `Bearer ${settings.apiKey}`;
  const tls = typeof settings.tls === 'object' ? { cert: settings.tls.clientCertPair.crt, key: settings.tls.clientCertPair.key } : {};
  const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const sent = send(url, { method: 'POST', headers, timeout: HTTP_START_DEADLINE_MS, ...tls }, (response: IncomingMessage) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      response.on('error', reject);
    });
    sent.on('timeout', () => sent.destroy(new Error(`no answer within ${HTTP_START_DEADLINE_MS / 1000} s`)));
    sent.on('error', (error: NodeJS.ErrnoException) => reject(new Error(socketErrorReason(error, url.hostname))));
    sent.end(body);
  });
  let parsed: { runId?: unknown; code?: unknown; message?: unknown };
  try {
    parsed = JSON.parse(answer.text) as typeof parsed;
  } catch {
    throw new Error(`HTTP ${answer.status}, not Temporal's answer`);
  }
  if (answer.status >= 200 && answer.status < 300 && typeof parsed.runId === 'string') return parsed.runId;
  if (typeof parsed.code === 'number' && typeof parsed.message === 'string') {
    throw new TemporalStartRefusedError(`Temporal refused to start run ${start.workflowId} (namespace ${settings.namespace}, ${origin}): ${parsed.message}`);
  }
  throw new Error(`HTTP ${answer.status}, not Temporal's answer`);
}
