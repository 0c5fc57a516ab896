/**
 * Schemas of the API's resources, envelopes and errors: the one place both the emulator (for its
 * OpenAPI document) and the client (to validate responses) take them from.
 */
import { z } from 'zod';
import { PLATFORMS, WEBHOOK_EVENTS, type EndpointName } from './endpoints.js';

const isoTimestamp = z.string().regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/, 'ISO 8601 UTC timestamp');
const count = z.number().int().nonnegative();
const platform = z.enum(PLATFORMS);

export const requestIdSchema = z.string().regex(/^req_[A-Za-z0-9]+$/);

export const transcriptSchema = z.object({
  platform,
  entity_id: z.string(),
  language: z.string(),
  source: z.enum(['subtitles', 'audio']),
  text: z.string(),
  segments: z.array(z.object({ start: z.number(), end: z.number(), text: z.string() })),
});

export const summarySchema = z.object({
  platform,
  entity_id: z.string(),
  language: z.string(),
  summary: z.string(),
});

export const statsSchema = z.object({
  platform,
  entity_id: z.string(),
  url: z.string(),
  author: z.object({ handle: z.string(), name: z.string() }),
  posted_at: isoTimestamp,
  metrics: z.object({ views: count, likes: count, comments: count, shares: count }),
});

export const commentSchema = z.object({
  id: z.string(),
  text: z.string(),
  author: z.object({ handle: z.string() }),
  likes: count,
  posted_at: isoTimestamp,
});

export const channelProfileSchema = z.object({
  platform,
  handle: z.string().regex(/^[^@]/),
  name: z.string(),
  bio: z.string(),
  verified: z.boolean(),
  metrics: z.object({ followers: count, following: count, posts: count }),
});

export const channelItemSchema = z.object({
  id: z.string(),
  url: z.string(),
  caption: z.string(),
  posted_at: isoTimestamp,
  /** Present on channel-videos and channel-reels only. */
  metrics: z.object({ views: count.optional(), likes: count, comments: count }),
});

export const searchResultSchema = z.object({
  id: z.string(),
  url: z.string(),
  caption: z.string(),
  author: z.object({ handle: z.string() }),
  metrics: z.object({ views: count, likes: count }),
  posted_at: isoTimestamp,
});

export const downloadSchema = z.object({
  platform,
  entity_id: z.string(),
  media_url: z.string(),
  mime_type: z.string(),
  expires_at: isoTimestamp,
  warning: z.string(),
});

export const listMetaSchema = z.object({
  count,
  limit: z.number().int().positive(),
  item: z.enum(['video', 'post', 'reel', 'result']).optional(),
  cursor: z.string().optional(),
  has_more: z.boolean(),
});

export const jobStatusSchema = z.enum(['queued', 'running', 'completed', 'failed']);

export const jobSchema = z.object({
  job_id: z.string().regex(/^job_[A-Za-z0-9]+$/),
  status: jobStatusSchema,
  endpoint: z.string(),
  params: z.record(z.string(), z.string()),
  created_at: isoTimestamp,
  item_count: count.nullable(),
  credits_charged: count,
  completed_at: isoTimestamp.nullable(),
  error: z.object({ code: z.string(), message: z.string() }).nullable(),
});

export const webhookEventSchema = z.enum(WEBHOOK_EVENTS);

export const webhookEndpointSchema = z.object({
  webhook_id: z.string().regex(/^wh_[A-Za-z0-9]+$/),
  url: z.string(),
  events: z.array(webhookEventSchema),
  created_at: isoTimestamp,
});

export const createdWebhookEndpointSchema = webhookEndpointSchema.extend({
  secret: z.string().regex(/^whsec_[A-Za-z0-9+/=]+$/),
});

export const errorBodySchema = z.object({
  error: z.object({
    code: z.string(),
    message: z.string(),
    param: z.string().optional(),
    required_credits: count.optional(),
    remaining_credits: count.optional(),
  }),
  request_id: requestIdSchema,
});

/** The payload of a webhook delivery (Standard Webhooks). */
export const webhookPayloadSchema = z.object({
  type: webhookEventSchema,
  timestamp: isoTimestamp,
  data: z.record(z.string(), z.unknown()),
});

/**
 * What each endpoint answers with: an object endpoint's object, a list endpoint's item. The one
 * table of it: the client checks answers by it and the emulator's OpenAPI document describes them by it.
 */
export const OBJECT_SCHEMAS = {
  transcript: transcriptSchema,
  summary: summarySchema,
  stats: statsSchema,
  'channel-stats': channelProfileSchema,
  download: downloadSchema,
} as const satisfies Partial<Record<EndpointName, z.ZodType>>;

export const LIST_ITEM_SCHEMAS = {
  comments: commentSchema,
  'channel-videos': channelItemSchema,
  'channel-posts': channelItemSchema,
  'channel-reels': channelItemSchema,
  search: searchResultSchema,
  'hashtag-search': searchResultSchema,
  'reels-search': searchResultSchema,
} as const satisfies Partial<Record<EndpointName, z.ZodType>>;

/**
 * Every endpoint's resource, whatever its shape: the two tables above as one, so an endpoint the
 * catalog names without a resource fails the typecheck here. What reads a resource's fields derives
 * them from this: the client's checks, the emulator's OpenAPI document, and the warehouse's raw
 * columns and schema drift (src/warehouse/raw-columns.ts, schema-drift.ts).
 */
export const RESOURCE_SCHEMAS: Readonly<Record<EndpointName, z.ZodObject>> = { ...OBJECT_SCHEMAS, ...LIST_ITEM_SCHEMAS } satisfies Record<EndpointName, z.ZodObject>;

/** Whether a schema member is an ISO 8601 UTC timestamp (the warehouse reads it as a TIMESTAMPTZ). */
export function isTimestampSchema(schema: z.ZodType): boolean {
  return schema === isoTimestamp;
}

export function envelopeSchema<T extends z.ZodType>(data: T) {
  return z.object({ data, meta: z.record(z.string(), z.unknown()).optional(), request_id: requestIdSchema });
}

export function listEnvelopeSchema<T extends z.ZodType>(item: T) {
  return z.object({ data: z.array(item), meta: listMetaSchema, request_id: requestIdSchema });
}

export type Transcript = z.infer<typeof transcriptSchema>;
export type Summary = z.infer<typeof summarySchema>;
export type Stats = z.infer<typeof statsSchema>;
export type Comment = z.infer<typeof commentSchema>;
export type ChannelProfile = z.infer<typeof channelProfileSchema>;
export type ChannelItem = z.infer<typeof channelItemSchema>;
export type SearchResult = z.infer<typeof searchResultSchema>;
export type Download = z.infer<typeof downloadSchema>;
export type ListMeta = z.infer<typeof listMetaSchema>;
export type Job = z.infer<typeof jobSchema>;
export type WebhookEndpoint = z.infer<typeof webhookEndpointSchema>;
export type CreatedWebhookEndpoint = z.infer<typeof createdWebhookEndpointSchema>;
export type WebhookPayload = z.infer<typeof webhookPayloadSchema>;
