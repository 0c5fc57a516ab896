/**
 * The OpenAPI 3.1 document the emulator serves at /openapi.json, generated from the endpoint
 * catalog and the resource schemas, so it describes exactly what the server routes and answers.
 */
import { z } from 'zod';
import { ENDPOINTS, PAGE_LIMITS, WEBHOOK_EVENTS, type EndpointName, type EndpointSpec } from '../api-catalog/endpoints.js';
import {
  channelItemSchema,
  channelProfileSchema,
  commentSchema,
  createdWebhookEndpointSchema,
  downloadSchema,
  errorBodySchema,
  jobSchema,
  LIST_ITEM_SCHEMAS,
  listMetaSchema,
  OBJECT_SCHEMAS,
  searchResultSchema,
  statsSchema,
  summarySchema,
  transcriptSchema,
  webhookEndpointSchema,
} from '../api-catalog/resources.js';

const COMPONENTS: Record<string, z.ZodType> = {
  Transcript: transcriptSchema,
  Summary: summarySchema,
  Stats: statsSchema,
  Comment: commentSchema,
  ChannelProfile: channelProfileSchema,
  ChannelItem: channelItemSchema,
  SearchResult: searchResultSchema,
  Download: downloadSchema,
  ListMeta: listMetaSchema,
  Job: jobSchema,
  WebhookEndpoint: webhookEndpointSchema,
  CreatedWebhookEndpoint: createdWebhookEndpointSchema,
  Error: errorBodySchema,
};

const ref = (name: keyof typeof COMPONENTS) => ({ $ref: `#/components/schemas/${name}` });
const requestId = { type: 'string', pattern: '^req_[A-Za-z0-9]+$' };
const envelope = (data: object) => ({ type: 'object', required: ['data', 'request_id'], properties: { data, request_id: requestId } });
const listEnvelope = (item: object) => ({
  type: 'object',
  required: ['data', 'meta', 'request_id'],
  properties: { data: { type: 'array', items: item }, meta: ref('ListMeta'), request_id: requestId },
});
const json = (schema: object, description: string) => ({ description, content: { 'application/json': { schema } } });
const errorResponse = (description: string) => json(ref('Error'), description);

/** The component a schema of the catalog is published as. */
function componentOf(schema: z.ZodType): keyof typeof COMPONENTS {
  const name = Object.keys(COMPONENTS).find((key) => COMPONENTS[key] === schema);
  if (name === undefined) throw new Error('a schema of the endpoint table is not among the OpenAPI components');
  return name;
}

function answerSchemaOf(spec: EndpointSpec): keyof typeof COMPONENTS {
  const table: Partial<Record<EndpointName, z.ZodType>> = spec.shape === 'list' ? LIST_ITEM_SCHEMAS : OBJECT_SCHEMAS;
  const schema = table[spec.name];
  if (schema === undefined) throw new Error(`${spec.name} has no answer schema in src/api-catalog/resources.ts`);
  return componentOf(schema);
}

function queryParameter(name: string, description: string, schema: object, required = false) {
  return { name, in: 'query', required, description, schema };
}

function contentOperation(spec: EndpointSpec) {
  const parameters = [
    queryParameter(spec.param, `Identifies the ${spec.param === 'url' ? 'content' : spec.param === 'handle' ? 'account (no leading @)' : 'search'}`, { type: 'string' }, true),
    queryParameter('fresh', 'true bypasses the cache at the same price', { type: 'boolean' }),
    queryParameter('format', 'Response format', { type: 'string', enum: [...spec.formats] }),
  ];
  const responses: Record<string, unknown> = {
    '400': errorResponse('Invalid or missing parameter, unsupported format or content, malformed or expired cursor'),
    '401': errorResponse('Missing or invalid API key'),
    '402': errorResponse('Balance cannot cover the worst case of the call'),
    '404': errorResponse('Unknown content item or handle'),
    '429': errorResponse('Rate limited; see Retry-After'),
    '500': errorResponse('Injected fault'),
    '502': errorResponse('Injected fault'),
    '503': errorResponse('Injected fault, or download_unavailable'),
  };
  if (spec.shape === 'list') {
    parameters.push(
      queryParameter('limit', `Page size, default ${PAGE_LIMITS.defaultLimit}; above ${PAGE_LIMITS.maxSynchronous} (up to ${PAGE_LIMITS.maxJob}) starts a job`, { type: 'integer', minimum: 1, maximum: PAGE_LIMITS.maxJob }),
      queryParameter('cursor', 'meta.cursor of the previous page', { type: 'string' }),
    );
    const content: Record<string, unknown> = { 'application/json': { schema: listEnvelope(ref(answerSchemaOf(spec))) } };
    if (spec.formats.includes('csv')) content['text/csv'] = { schema: { type: 'string' } };
    responses['200'] = { description: `A page, charged per ${spec.unit} returned`, content };
    responses['202'] = json(envelope(ref('Job')), `limit above ${PAGE_LIMITS.maxSynchronous}: a job was created`);
  } else {
    const content: Record<string, unknown> = { 'application/json': { schema: envelope(ref(answerSchemaOf(spec))) } };
    if (spec.formats.includes('text')) content['text/plain'] = { schema: { type: 'string' } };
    responses['200'] = { description: `Charged per ${spec.unit}`, content };
  }
  return { get: { operationId: `${spec.platform}_${spec.name.replace(/-/g, '_')}`, tags: [spec.platform], parameters, responses } };
}

export function buildOpenApiDocument(serverUrl: string): Record<string, unknown> {
  const schemas = Object.fromEntries(
    Object.entries(COMPONENTS).map(([name, schema]) => {
      const { $schema: _ignored, ...jsonSchema } = z.toJSONSchema(schema, { io: 'output' }) as Record<string, unknown>;
      return [name, jsonSchema];
    }),
  );
  const paths: Record<string, unknown> = {};
  for (const spec of ENDPOINTS) paths[`/${spec.platform}/${spec.name}`] = contentOperation(spec);
  const jobId = { name: 'job_id', in: 'path', required: true, schema: { type: 'string' } };
  paths['/jobs/{job_id}'] = {
    get: {
      operationId: 'get_job',
      parameters: [jobId],
      responses: { '200': json(envelope(ref('Job')), 'The job record; polling is free'), '404': errorResponse('Unknown job') },
    },
  };
  paths['/jobs/{job_id}/results'] = {
    get: {
      operationId: 'get_job_results',
      parameters: [
        jobId,
        queryParameter('limit', `Page size, default ${PAGE_LIMITS.jobResultsDefault}, at most ${PAGE_LIMITS.jobResultsMax}`, { type: 'integer', minimum: 1, maximum: PAGE_LIMITS.jobResultsMax }),
        queryParameter('cursor', 'meta.cursor of the previous results page', { type: 'string' }),
      ],
      responses: {
        '200': json(listEnvelope({}), 'A page of results, free of charge'),
        '404': errorResponse('Unknown job'),
        '409': errorResponse('The job has not completed, or failed'),
        '410': errorResponse('Results are kept 24 hours'),
      },
    },
  };
  paths['/webhooks'] = {
    post: {
      operationId: 'create_webhook',
      requestBody: {
        required: true,
        content: {
          'application/json': {
            schema: {
              type: 'object',
              required: ['url', 'events'],
              properties: { url: { type: 'string', format: 'uri', pattern: '^https://' }, events: { type: 'array', minItems: 1, items: { type: 'string', enum: [...WEBHOOK_EVENTS] } } },
            },
          },
        },
      },
      responses: { '201': json(envelope(ref('CreatedWebhookEndpoint')), 'Created; the secret is shown only here'), '400': errorResponse('Not HTTPS, or unknown events') },
    },
    get: {
      operationId: 'list_webhooks',
      responses: { '200': json(envelope({ type: 'array', items: ref('WebhookEndpoint') }), 'Registered endpoints, without secrets') },
    },
  };
  paths['/webhooks/{webhook_id}'] = {
    delete: {
      operationId: 'delete_webhook',
      parameters: [{ name: 'webhook_id', in: 'path', required: true, schema: { type: 'string' } }],
      responses: { '204': { description: 'Deleted; no body' }, '404': errorResponse('Unknown webhook endpoint') },
    },
  };
  return {
    openapi: '3.1.0',
    info: {
      title: 'Social Content Data API (social-harvester emulator)',
      version: '1.0.0',
      description: 'The spec in ../shared/api-spec.md, with the emulator\'s documented behaviour where it says "not shown" (docs/api.md).',
    },
    servers: [{ url: serverUrl }],
    security: [{ bearer: [] }],
    paths,
    components: { schemas, securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'API keys begin with sk_live_' } } },
  };
}
