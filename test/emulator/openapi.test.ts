import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENDPOINTS, endpointKey } from '../../src/api-catalog/endpoints.js';
import { http, q, startTestEmulator, type HttpResult, type TestEmulator } from '../support/emulator.js';

type Operation = { responses: Record<string, { content?: Record<string, { schema: object }> }>; parameters?: { name: string; schema: { enum?: string[] } }[] };
type Doc = { openapi: string; servers: { url: string }[]; paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, object> } };

let emulator: TestEmulator;
let doc: Doc;
const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
const examples: Record<string, string> = {};

beforeAll(async () => {
  emulator = await startTestEmulator();
  doc = (await http<Doc>(`${emulator.origin}/openapi.json`)).json;
  const catalog = await emulator.catalog();
  const video = (await emulator.call<{ data: { url: string }[] }>(`/tiktok/channel-videos?handle=${catalog.tiktok.handles[0]}&limit=1`)).json.data[0]!.url;
  const reel = (await emulator.call<{ data: { url: string }[] }>(`/instagram/channel-reels?handle=${catalog.instagram.handles[0]}&limit=1`)).json.data[0]!.url;
  Object.assign(examples, { tiktokUrl: video, instagramUrl: reel, tiktokHandle: catalog.tiktok.handles[0], instagramHandle: catalog.instagram.handles[0] });
});
afterAll(() => emulator.close());

/** Validates a response against the document's schema for its path, method, status and media type. */
function expectMatchesDocument(path: string, method: string, result: HttpResult, mediaType = 'application/json') {
  const operation = doc.paths[path]?.[method];
  expect(operation, `${method} ${path} in the document`).toBeDefined();
  const response = operation!.responses[String(result.status)];
  expect(response, `${method} ${path} documents status ${result.status}`).toBeDefined();
  const schema = response!.content?.[mediaType]?.schema;
  if (!schema) return;
  const validate = ajv.compile({ ...schema, components: doc.components });
  const valid = validate(result.json);
  expect(valid, `${method} ${path} ${result.status}: ${ajv.errorsText(validate.errors)}`).toBe(true);
}

function identifyingValue(spec: (typeof ENDPOINTS)[number]): string {
  if (spec.param === 'query') return spec.name === 'hashtag-search' ? 'booktok' : 'sourdough';
  if (spec.param === 'handle') return spec.platform === 'tiktok' ? examples.tiktokHandle! : examples.instagramHandle!;
  return spec.platform === 'tiktok' ? examples.tiktokUrl! : examples.instagramUrl!;
}

describe('/openapi.json stays true to the server', () => {
  it('is OpenAPI 3.1 and names this server', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.servers[0]!.url).toBe(emulator.baseUrl);
  });

  it('documents exactly the routes the server answers', () => {
    const expected = [...ENDPOINTS.map((spec) => `/${endpointKey(spec)}`), '/jobs/{job_id}', '/jobs/{job_id}/results', '/webhooks', '/webhooks/{webhook_id}'];
    expect(Object.keys(doc.paths).sort()).toEqual(expected.sort());
  });

  it.each(ENDPOINTS.map((spec) => [endpointKey(spec), spec] as const))('%s: real answers match the documented schemas', async (key, spec) => {
    const path = `/${key}`;
    const result = await emulator.call(`${path}?${spec.param}=${q(identifyingValue(spec))}`);
    expectMatchesDocument(path, 'get', result);
    const formats = doc.paths[path]!.get!.parameters!.find((parameter) => parameter.name === 'format')!.schema.enum!;
    expect(formats).toEqual([...spec.formats]);
    const unauthorized = await emulator.call(`${path}?${spec.param}=${q(identifyingValue(spec))}`, { apiKey: null });
    expectMatchesDocument(path, 'get', unauthorized);
    if (spec.shape === 'list') {
      const job = await emulator.call(`${path}?${spec.param}=${q(identifyingValue(spec))}&limit=60`);
      expect(job.status).toBe(202);
      expectMatchesDocument(path, 'get', job);
    }
  });

  it('jobs and webhooks answer what the document says', async () => {
    const job = await emulator.call<{ data: { job_id: string } }>(`/tiktok/search?query=yoga&limit=120`);
    const jobId = job.json.data.job_id;
    expectMatchesDocument('/jobs/{job_id}', 'get', await emulator.call(`/jobs/${jobId}`));
    expectMatchesDocument('/jobs/{job_id}/results', 'get', await emulator.call(`/jobs/${jobId}/results`));
    expectMatchesDocument('/jobs/{job_id}', 'get', await emulator.call('/jobs/job_missing'));
    const created = await emulator.call<{ data: { webhook_id: string } }>('/webhooks', { body: { url: 'https://localhost:9/hooks', events: ['job.completed'] } });
    expectMatchesDocument('/webhooks', 'post', created);
    expectMatchesDocument('/webhooks', 'post', await emulator.call('/webhooks', { body: { url: 'http://localhost:9/hooks', events: ['job.completed'] } }));
    expectMatchesDocument('/webhooks', 'get', await emulator.call('/webhooks'));
    expectMatchesDocument('/webhooks/{webhook_id}', 'delete', await emulator.call(`/webhooks/${created.json.data.webhook_id}`, { method: 'DELETE' }));
  });
});
