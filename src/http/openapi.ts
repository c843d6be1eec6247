// The OpenAPI document at /openapi/json: what @elysiajs/openapi derives from the routes' `t` schemas,
// finished here into a valid document (its 204s, integers, unnamed schemas and missing errors are
// fixed in one place, for every route, so new routes need nothing special).
import { toOpenAPISchema } from '@elysiajs/openapi';
import type { AnyElysia } from 'elysia';

type Json = Record<string, unknown>;
type Operation = { operationId?: string; responses?: Record<string, Json> } & Json;

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

const STATUS_TEXT: Record<string, string> = {
  200: 'OK',
  201: 'Created',
  204: 'No Content: done, empty body',
  400: 'Bad Request: the body, a parameter or the key id is malformed',
  401: 'Unauthorized: no credentials of this endpoint’s scheme',
  403: 'Forbidden: credentials invalid or expired, or a level above the caller’s',
  404: 'Not Found',
  409: 'Conflict: the user already holds MAX_KEYS_PER_USER live keys',
  413: 'Content Too Large: the body is over 16 KiB',
  500: 'Internal Server Error: unexpected; the body names the request id',
  503: 'Service Unavailable: the database cannot answer now; retry after Retry-After seconds',
};

const ERROR_REF = { $ref: '#/components/schemas/Error' };

/** In a route's `detail`: its query parameters, when it also has path parameters (see below). */
export const QUERY_PARAMETERS = 'x-query-parameters';
const header = (name: string) => ({ $ref: `#/components/headers/${name}` });

export type OpenApiOptions = {
  basePath: string;
  info: { title: string; version: string; description: string };
  tags: { name: string; description: string }[];
  securitySchemes: Record<string, Json>;
};

/** The finished document for `app`'s routes; computed once, on first request. */
export function openApiDocument(app: AnyElysia, options: OpenApiOptions): () => Json {
  let document: Json | undefined;
  return () => {
    document ??= finishDocument(
      toOpenAPISchema(app) as { paths: Json; components: { schemas: Json } },
      options,
    );
    return document;
  };
}

export function finishDocument(
  generated: { paths: Json; components: { schemas: Json } },
  { basePath, info, tags, securitySchemes }: OpenApiOptions,
): Json {
  const schemas: Json = {
    Error: {
      title: 'Error',
      type: 'object',
      required: ['result', 'error'],
      properties: {
        result: { type: 'string', const: 'error' },
        error: { type: 'string', description: 'One readable sentence.' },
      },
      additionalProperties: false,
    },
    ...generated.components.schemas,
  };
  const paths: Json = {};
  for (const [fullPath, item] of Object.entries(generated.paths)) {
    // Paths are relative to the server entry, which carries BASE_PATH.
    const path =
      basePath !== '' && fullPath.startsWith(basePath) ? fullPath.slice(basePath.length) || '/' : fullPath;
    // The console's own routes (its page and the API its page calls, by session cookie) are no API.
    if (path.startsWith('/console/')) continue;
    const operations = item as Record<string, Operation>;
    for (const method of METHODS) {
      const operation = operations[method];
      if (!operation) continue;
      operation.operationId = operationIdOf(method, path);
      // The generator writes a route's path parameters over `detail.parameters`: a route with both
      // declares its query parameters here instead, and they are added after the path's.
      const query = operation[QUERY_PARAMETERS];
      if (Array.isArray(query)) {
        operation.parameters = [...((operation.parameters as unknown[] | undefined) ?? []), ...query];
        delete operation[QUERY_PARAMETERS];
      }
      operation.security ??= []; // said explicitly: this operation takes no credentials
      operation.responses = finishResponses(operation.responses ?? {});
    }
    paths[path] = namedSchemas(integers(item), schemas);
  }
  return {
    openapi: '3.1.0',
    info: { ...info, license: { name: 'MIT', identifier: 'MIT' } },
    servers: [
      { url: basePath || '/', description: 'This keygate (relative to where the document is served).' },
    ],
    tags,
    paths,
    components: {
      schemas: integers(schemas),
      securitySchemes,
      headers: {
        'X-Request-Id': {
          description: 'The request’s id: the client’s own when it sent a sane one, else generated.',
          schema: { type: 'string' },
        },
        'WWW-Authenticate': {
          description: 'The scheme the endpoint expects (Bearer or Basic).',
          schema: { type: 'string' },
        },
        'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer' } },
      },
    },
  };
}

function finishResponses(responses: Record<string, Json>): Record<string, Json> {
  const finished: Record<string, Json> = {};
  const all = {
    ...responses,
    500: responses[500] ?? errorResponse(),
    503: responses[503] ?? errorResponse(),
  };
  for (const [status, response] of Object.entries(all)) {
    const { content, ...rest } = response;
    const headers: Json = { 'X-Request-Id': header('X-Request-Id') };
    if (status === '401') headers['WWW-Authenticate'] = header('WWW-Authenticate');
    if (status === '503') headers['Retry-After'] = header('Retry-After');
    // Elysia writes t.Void() as content {type:"void"}, which is not a media-type map: no body at all.
    const hasBody = status !== '204' && content !== undefined && !('type' in (content as Json));
    finished[status] = {
      ...rest,
      description: STATUS_TEXT[status] ?? `Status ${status}`,
      headers,
      ...(hasBody ? { content } : {}),
    };
  }
  return finished;
}

function errorResponse(): Json {
  return { content: { 'application/json': { schema: ERROR_REF } } };
}

/** `post /apikeys/{id}/jwt` → `postApikeysByIdJwt`, the plugin's scheme without BASE_PATH. */
function operationIdOf(method: string, path: string): string {
  const words = path
    .split('/')
    .filter(Boolean)
    .map((segment) => {
      const parameter = /^\{(.+)\}$/.exec(segment)?.[1];
      const word = (parameter ? `By-${parameter}` : segment).replace(/[^A-Za-z0-9]+(.)?/g, (_, next) =>
        next ? next.toUpperCase() : '',
      );
      return word.charAt(0).toUpperCase() + word.slice(1);
    });
  return method + (words.join('') || 'Index');
}

/** Integers as integers: a whole number is t.Number({ multipleOf: 1 }) (model.ts, WholeNumber). */
function integers<T>(value: T): T {
  if (Array.isArray(value)) return value.map(integers) as T;
  if (value === null || typeof value !== 'object') return value;
  const schema = Object.fromEntries(
    Object.entries(value).map(([key, inner]) => [key, integers(inner)]),
  ) as Json;
  if (schema.type === 'number' && schema.multipleOf === 1) {
    const { multipleOf: _, ...rest } = schema;
    return { ...rest, type: 'integer' } as T;
  }
  return schema as T;
}

/** A schema with a `title` becomes components.schemas[title] and is referred to by $ref. */
function namedSchemas<T>(value: T, schemas: Json): T {
  if (Array.isArray(value)) return value.map((inner) => namedSchemas(inner, schemas)) as T;
  if (value === null || typeof value !== 'object') return value;
  const schema = Object.fromEntries(
    Object.entries(value).map(([key, inner]) => [key, namedSchemas(inner, schemas)]),
  ) as Json;
  if (typeof schema.title === 'string' && (schema.type === 'object' || schema.properties)) {
    schemas[schema.title] ??= schema;
    return { $ref: `#/components/schemas/${schema.title}` } as T;
  }
  return schema as T;
}
