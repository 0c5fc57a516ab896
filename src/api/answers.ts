/**
 * Reading an answer of the API: its headers, its body checked against the endpoint's schema, and
 * the checks of an answer of the right shape (a page within its limit, unique non-empty ids, the
 * asked item or account). An answer that fails any of them is refused before anything lands.
 */
import type { z } from 'zod';
import { parseContentUrl } from '../api-catalog/content-urls.js';
import { endpointKey, type EndpointSpec } from '../api-catalog/endpoints.js';
import { ResponseValidationError } from './errors.js';

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** Turns a problem found in an answer of the right shape into the call's failure. */
export function checkAnswer(response: RawResponse, spec: EndpointSpec, problem: string | undefined): void {
  if (problem !== undefined) throw refusedAnswer(response, `${endpointKey(spec)}: ${problem}`);
}

/** The answer's body, checked against its schema; an answer that is not JSON or not of the shape is refused. */
export function parseAnswer<S extends z.ZodType>(response: RawResponse, schema: S, spec?: EndpointSpec): z.infer<S> {
  let json: unknown;
  try {
    json = JSON.parse(response.text);
  } catch {
    throw refusedAnswer(response, 'the body is not JSON');
  }
  const checked = schema.safeParse(json);
  if (!checked.success) {
    const where = checked.error.issues.slice(0, 3).map((issue) => `${issue.path.join('.') || '(body)'}: ${issue.message}`).join('; ');
    throw refusedAnswer(response, `${spec ? `${endpointKey(spec)}: ` : ''}unexpected shape: ${where}`);
  }
  // The answer as it came, not zod's copy without the members its schema lacks: a field the API
  // added is landed, recorded as schema drift by the load and kept in the lake's raw answers.
  return json as z.infer<S>;
}

/** A list page's body, parsed and checked (parseAnswer, listAnswerProblem); a page that fails either is refused. */
export function listAnswer<S extends z.ZodType>(response: RawResponse, schema: S, spec: EndpointSpec, limit: number): z.infer<S> {
  const body = parseAnswer(response, schema, spec);
  checkAnswer(response, spec, listAnswerProblem(limit, (body as { data: { id: string }[] }).data));
  return body;
}

/** An object answer's body, parsed and checked (parseAnswer, objectAnswerProblem); one that fails either is refused. */
export function objectAnswer<S extends z.ZodType>(response: RawResponse, schema: S, spec: EndpointSpec, params: { url?: string; handle?: string }): z.infer<S> {
  const body = parseAnswer(response, schema, spec);
  checkAnswer(response, spec, objectAnswerProblem(spec, params, (body as { data: unknown }).data));
  return body;
}

/** An answer refused: it is not data. It carries what the API said it charged for it. */
export function refusedAnswer(response: RawResponse, message: string): ResponseValidationError {
  const requestId = header(response.headers, 'x-request-id');
  const charged = Number(header(response.headers, 'x-credits-charged'));
  return new ResponseValidationError(`${message}${requestId ? ` (request ${requestId})` : ''}`, {
    status: response.status,
    code: 'unexpected_response',
    requestId,
    rawBody: response.text,
    ...(Number.isInteger(charged) && charged >= 0 ? { creditsCharged: charged } : {}),
  });
}

/** The API's clock at an answer: its Date header, or this machine's clock when it has none. */
export function apiTime(headers: Record<string, string | string[] | undefined>): Date {
  const date = Date.parse(header(headers, 'date') ?? '');
  return new Date(Number.isNaN(date) ? Date.now() : date);
}

/**
 * What is wrong with a list page of the right shape: more items than asked for, or items without
 * an id or with the same id twice (ids are how the warehouse tells items apart).
 */
export function listAnswerProblem(limit: number, items: readonly { id: string }[]): string | undefined {
  if (items.length > limit) return `the page holds ${items.length} items, more than the limit of ${limit} asked for`;
  const ids = new Set<string>();
  for (const [index, item] of items.entries()) {
    if (item.id === '') return `item ${index} has an empty id`;
    if (ids.has(item.id)) return `item ${index} repeats the id ${JSON.stringify(item.id)}`;
    ids.add(item.id);
  }
  return undefined;
}

/**
 * What is wrong with an object answer of the right shape: it is about another item or account
 * than the one asked for, where the answer names it (the item's id as its URL gives it, the
 * profile's handle).
 */
export function objectAnswerProblem(spec: EndpointSpec, params: { url?: string; handle?: string }, data: unknown): string | undefined {
  const answer = data as { entity_id?: string; handle?: string };
  if (params.url !== undefined && answer.entity_id !== undefined) {
    const asked = parseContentUrl(spec.platform, params.url)?.itemId;
    if (asked !== undefined && answer.entity_id !== asked) return `the answer is about item ${JSON.stringify(answer.entity_id)}, not ${JSON.stringify(asked)} as asked`;
  }
  if (params.handle !== undefined && answer.handle !== undefined && answer.handle.toLowerCase() !== params.handle.replace(/^@/, '').toLowerCase()) {
    return `the answer is about account ${JSON.stringify(answer.handle)}, not ${JSON.stringify(params.handle)} as asked`;
  }
  return undefined;
}

export function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Data rows of a CSV page: lines after the header (captions never hold line breaks). */
export function countCsvRows(text: string): number {
  return Math.max(0, text.split('\r\n').filter((line) => line !== '').length - 1);
}
