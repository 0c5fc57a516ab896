/**
 * A run's start over Temporal's HTTP API (src/temporal/run-start.ts), against the real dev server:
 * its arguments arrive byte for byte as the SDK would send them; an HTTP API that does not answer
 * as Temporal leaves the start to the gRPC client; an answer lost after Temporal started the run
 * does not start it twice; a refusal by Temporal is said, without the API key.
 */
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Client } from '@temporalio/client';
import { startRunExecution, TemporalStartRefusedError, type RunStart } from '../../src/temporal/run-start.js';
import type { TemporalSettings } from '../../src/temporal/settings.js';
import { freePort } from '../../src/cli/free-port.js';
import { temporalClient } from '../support/temporal.js';

let client: Client;
const servers: Server[] = [];

beforeAll(async () => {
  client = await temporalClient();
});
afterAll(async () => {
  for (const server of servers) server.close();
  await client?.connection.close();
});

let started = 0;
/** A run's start that no worker serves: the tests look at what Temporal made of it, then end it. */
function runStart(args: unknown[] = [{ harvest: { name: 'h', comments: [], channels: [{ handle: 'é', max_items: 3 }] }, note: null }]): RunStart {
  started += 1;
  return { workflowId: `run-start-${process.pid}-${Date.now()}-${started}`, workflowType: 'harvestWorkflow', taskQueue: `run-start-nobody-${process.pid}`, summary: 'h: budget 10 credits', args };
}

function settings(origin: string | undefined, named = true): TemporalSettings {
  return { address: inject('temporalAddress'), namespace: 'default', ...(origin ? { http: { origin, named } } : {}) };
}

/** The run's input as Temporal keeps it: each payload's encoding and bytes. */
async function inputOf(workflowId: string): Promise<{ encoding: string; data: string }[]> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const payloads = history.events![0]!.workflowExecutionStartedEventAttributes!.input!.payloads!;
  return payloads.map((payload) => ({ encoding: Buffer.from(payload.metadata!.encoding!).toString(), data: Buffer.from(payload.data!).toString() }));
}

async function end(workflowId: string): Promise<void> {
  await client.workflow.getHandle(workflowId).terminate('test done');
}

/** An HTTP server on loopback: `handle` answers each request. */
async function serve(handle: Parameters<typeof createServer>[1]): Promise<string> {
  const server = createServer(handle!);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('starting a run over HTTP', () => {
  it('gives the workflow its arguments as the SDK writes them: json/plain, the bytes of JSON.stringify (an empty list stays a list)', async () => {
    const start = runStart();
    const warnings: string[] = [];
    const run = await startRunExecution(settings(`http://${inject('temporalHttpAddress')}`), start, () => Promise.reject(new Error('the gRPC client was asked')), (line) => warnings.push(line));
    try {
      expect(run.over).toBe('http');
      const description = await client.workflow.getHandle(start.workflowId).describe();
      expect(description.runId).toBe(run.runId);
      expect(description.taskQueue).toBe(start.taskQueue);
      expect(description.type).toBe('harvestWorkflow');
      expect(await inputOf(start.workflowId)).toEqual([{ encoding: 'json/plain', data: JSON.stringify(start.args[0]) }]);
      expect(warnings).toEqual([]);
    } finally {
      await end(start.workflowId);
    }
  });

  it('leaves the start to the gRPC client when nothing listens at the HTTP address, and says so when the user named it', async () => {
    const start = runStart();
    const warnings: string[] = [];
    const closed = `http://127.0.0.1:${await freePort()}`;
    const run = await startRunExecution(settings(closed), start, async () => client, (line) => warnings.push(line));
    try {
      expect(run.over).toBe('grpc');
      expect((await client.workflow.getHandle(start.workflowId).describe()).runId).toBe(run.runId);
      expect(warnings).toEqual([expect.stringContaining(`Temporal's HTTP API at ${closed} (TEMPORAL_HTTP_ADDRESS) did not answer (connection refused); starting the run through ${inject('temporalAddress')}`)]);
      // The local default, which may not be served, falls back without a word.
      const quiet: string[] = [];
      const second = runStart();
      await startRunExecution(settings(closed, false), second, async () => client, (line) => quiet.push(line));
      await end(second.workflowId);
      expect(quiet).toEqual([]);
    } finally {
      await end(start.workflowId);
    }
  });

  it('leaves the start to the gRPC client when something other than Temporal answers there', async () => {
    const start = runStart();
    const other = await serve((_request, response) => response.writeHead(404, { 'content-type': 'text/html' }).end('<h1>not here</h1>'));
    const run = await startRunExecution(settings(other), start, async () => client, () => undefined);
    try {
      expect(run.over).toBe('grpc');
      expect(await inputOf(start.workflowId)).toEqual([{ encoding: 'json/plain', data: JSON.stringify(start.args[0]) }]);
    } finally {
      await end(start.workflowId);
    }
  });

  it('does not start the run twice when Temporal started it and its answer was lost', async () => {
    const start = runStart();
    const target = new URL(`http://${inject('temporalHttpAddress')}`);
    let forwarded = 0;
    // Hands the start to Temporal, waits for its answer, then cuts the connection instead of passing it on.
    const losing = await serve((incoming, response) => {
      forwarded += 1;
      const upstream = request({ host: target.hostname, port: target.port, path: incoming.url, method: incoming.method, headers: incoming.headers }, (answer) => {
        answer.resume();
        answer.on('end', () => response.socket?.destroy());
      });
      incoming.pipe(upstream);
    });
    const run = await startRunExecution(settings(losing), start, async () => client, () => undefined);
    try {
      expect(forwarded).toBe(1);
      expect(run).toEqual({ runId: undefined, over: 'http' });
      // The gRPC start found it started, and took it for this run's: still its first execution.
      const description = await client.workflow.getHandle(start.workflowId).describe();
      expect(description.status.name).toBe('RUNNING');
      expect(description.runId).toBe(description.raw.workflowExecutionInfo?.firstRunId);
      expect(await inputOf(start.workflowId)).toEqual([{ encoding: 'json/plain', data: JSON.stringify(start.args[0]) }]);
    } finally {
      await end(start.workflowId);
    }
  });

  it("says Temporal's refusal with the namespace and address, never the API key, and does not try gRPC", async () => {
    const start = runStart();
    const origin = `http://${inject('temporalHttpAddress')}`;
    const refused = startRunExecution({ ...settings(origin), namespace: 'no-such-namespace', apiKey: 'tk_secret_value' }, start, () => Promise.reject(new Error('the gRPC client was asked')), () => undefined);
    await expect(refused).rejects.toBeInstanceOf(TemporalStartRefusedError);
    const message = await refused.catch((error: Error) => error.message);
    expect(message).toContain(`Temporal refused to start run ${start.workflowId} (namespace no-such-namespace, ${origin}):`);
    expect(message).not.toContain('tk_secret_value');
  });
});
