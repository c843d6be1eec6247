// The API-key endpoints of one authentication scheme: thin handlers over the service, the input
// checks the service does not make (the `:id` format, the query, the rotate body), and the key events
// (audit line, metrics) after each committed change.
import { Elysia, t, ValidationError } from 'elysia';
import { TypeCompiler } from 'elysia/type-system';
import type { AuthScheme } from '../auth/schemes';
import { isLevel } from '../core/levels';
import { readJsonBody } from '../http/body';
import { errorResponse, HttpError } from '../http/errors';
import { contextOf } from '../http/request-context';
import type { KeyEvents } from './audit';
import { decodeCursor, encodeCursor } from './cursor';
import {
  apiKeyModels,
  CreatedResponse,
  Credits,
  createKeyBody,
  describeCreateBodyProblem,
  ErrorResponse,
  nameProblem,
  propertyRule,
  RateLimit,
  SETTING_PROPERTIES,
  settingProblem,
  settingRule,
} from './model';
import { KEY_ID_PATTERN } from './secrets';
import type { ApiKeyService, KeyPatch } from './service';
import { MAX_GRACE_PERIOD_SECONDS } from './service';
import { type KeyMeta, META_MAX_BYTES } from './settings';

export type ApiKeyRoutesOptions = {
  /** `jwt` or `key`: the last path segment, naming the scheme (`session`: the console's, under /console/api). */
  suffix: 'jwt' | 'key' | 'session';
  auth: AuthScheme;
  service: ApiKeyService;
  events: KeyEvents;
  maxExpiresInSeconds: number;
};

const SCHEME_DOC: Record<
  'jwt' | 'key' | 'session',
  { security: Record<string, string[]>[]; scheme: string }
> = {
  jwt: { security: [{ bearer: [] }], scheme: 'a JSON Web Token' },
  key: { security: [{ basic: [] }, { apiKey: [], apiSecret: [] }], scheme: 'an API key and its secret' },
  session: { security: [], scheme: "the console's session cookie" },
};

const ID_PARAMS = t.Object({ id: t.String({ description: 'The `key` of the API key.' }) });

/**
 * What Elysia's parse step gives a route with a body: a placeholder, for the route's transform reads
 * the body itself once the scheme's derive has authenticated the caller, so a refused caller's body
 * is never read (bench/HISTORY.md). Elysia then checks the body's schema, as before; with
 * `parse: 'none'` it would skip that check. The parser's name gives the document its content type.
 */
const BODY_NOT_READ_YET = Symbol('body not read yet');

/** The parse step of a route whose transform reads the body (see BODY_NOT_READ_YET). */
export const READ_BODY_IN_TRANSFORM: [() => symbol, 'application/json'] = [
  () => BODY_NOT_READ_YET,
  'application/json',
];

/** What a route's transform may check of its path before the body is read (e.g. its user id). */
type PathCheck = (params: Record<string, string>) => void;

/**
 * A create's body, for the owner's create and the operator's: read after the credential (and
 * `checkPath`), checked against the create schema, and a schema failure answered with the rule that
 * failed.
 */
export function createBodyOptions(maxExpiresInSeconds: number, checkPath?: PathCheck) {
  return {
    parse: READ_BODY_IN_TRANSFORM,
    transform: async (context: { params: Record<string, string>; request: Request; body: unknown }) => {
      checkPath?.(context.params);
      context.body = await readJsonBody(context.request);
    },
    body: createKeyBody(maxExpiresInSeconds),
    error: ({ error }: { error: unknown }) => {
      if (error instanceof ValidationError && error.type === 'body') {
        return errorResponse(
          400,
          describeCreateBodyProblem(error.value, error.valueError?.path, maxExpiresInSeconds),
        );
      }
    },
  };
}

/** An update's body, for the owner's update and the operator's: after the credential, the id, then the body. */
export function updateBodyOptions(maxExpiresInSeconds: number) {
  return {
    parse: READ_BODY_IN_TRANSFORM,
    transform: async (context: { params: { id: string }; request: Request; body: unknown }) => {
      assertKeyId(context.params.id);
      context.body = updateBodyOf(await readJsonBody(context.request), maxExpiresInSeconds);
    },
    body: 'UpdateKeyRequest' as const,
  };
}

export function apiKeyRoutes({ suffix, auth, service, events, maxExpiresInSeconds }: ApiKeyRoutesOptions) {
  const doc = SCHEME_DOC[suffix];
  const errors = { 400: ErrorResponse, 401: ErrorResponse, 403: ErrorResponse, 404: ErrorResponse };
  const describe = (summary: string, description: string) => ({
    summary: `${summary} (${suffix})`,
    description: `Authenticated by ${doc.scheme}. ${description}`,
    security: doc.security,
    tags: ['API keys'],
  });
  return new Elysia()
    .use(apiKeyModels)
    .use(auth)
    .post(
      `/apikeys/${suffix}`,
      async ({ caller, body, set, request }) => {
        assertSettings(body);
        const { id: requestId, signal } = contextOf(request);
        const apikey = await service.createKey(caller, body, signal);
        events.created({ key: apikey.key, userId: apikey.userId, by: caller.by, requestId });
        set.status = 201;
        set.headers['cache-control'] = 'no-store';
        return { result: 'success' as const, apikey };
      },
      {
        ...createBodyOptions(maxExpiresInSeconds),
        response: { 201: CreatedResponse, ...errors, 409: ErrorResponse, 413: ErrorResponse },
        detail: {
          summary: `Create an API key (${suffix})`,
          description: `Authenticated by ${doc.scheme}. The secret is in this response only.`,
          security: doc.security,
          tags: ['API keys'],
        },
      },
    )
    .delete(
      `/apikeys/:id/${suffix}`,
      async ({ caller, params, set, request }) => {
        assertKeyId(params.id);
        const { id: requestId, signal } = contextOf(request);
        const row = await service.revokeKey(caller, params.id, signal);
        events.deleted({ key: row.id, userId: row.userId, by: caller.by, requestId });
        set.status = 204;
      },
      {
        params: ID_PARAMS,
        response: { 204: t.Void(), ...errors },
        detail: {
          summary: `Delete an API key (${suffix})`,
          description: `Authenticated by ${doc.scheme}. Only the caller's own keys, up to its level.`,
          security: doc.security,
          tags: ['API keys'],
        },
      },
    )
    .get(
      `/apikeys/${suffix}`,
      async ({ caller, request }) => {
        const { limit, after } = listQueryOf(request.url);
        const page = await service.listKeys(caller, { limit, after });
        return {
          result: 'success' as const,
          apikeys: page.items,
          nextCursor: page.next === null ? null : encodeCursor(page.next),
        };
      },
      {
        response: { 200: 'KeyListResponse', 400: ErrorResponse, 401: ErrorResponse, 403: ErrorResponse },
        detail: {
          ...describe(
            'List your API keys',
            "The caller's user's live keys at or below its level, newest first. Query: limit 1..100 (default 50), cursor from the previous page's nextCursor.",
          ),
          parameters: [
            {
              name: 'limit',
              in: 'query',
              required: false,
              schema: { type: 'integer', minimum: 1, maximum: 100 },
            },
            { name: 'cursor', in: 'query', required: false, schema: { type: 'string' } },
          ],
        },
      },
    )
    .get(
      `/apikeys/:id/${suffix}`,
      async ({ caller, params }) => {
        assertKeyId(params.id);
        return { result: 'success' as const, apikey: await service.getKey(caller, params.id) };
      },
      {
        params: ID_PARAMS,
        response: { 200: 'KeyResponse', ...errors },
        detail: describe(
          'Get one of your API keys',
          'Never the secret. 404 for a key that is not yours or not live.',
        ),
      },
    )
    .patch(
      `/apikeys/:id/${suffix}`,
      async ({ caller, params, body, request }) => {
        const { id: requestId, signal } = contextOf(request);
        const { apikey, row, changed } = await service.updateKey(caller, params.id, body, signal);
        events.updated({ key: row.id, userId: row.userId, by: caller.by, requestId, changed });
        return { result: 'success' as const, apikey };
      },
      {
        params: ID_PARAMS,
        ...updateBodyOptions(maxExpiresInSeconds),
        response: { 200: 'KeyResponse', ...errors, 413: ErrorResponse },
        detail: describe(
          'Update one of your API keys',
          'Change name, meta, enabled, level, expiresIn (from now), ratelimit or credits; null removes meta, ratelimit or credits. A key updating itself may only tighten (name, meta, disable itself, a lower level, an earlier expiry); a key with its own rate limit or credits may not update other keys.',
        ),
      },
    )
    .post(
      `/apikeys/:id/rotate/${suffix}`,
      async ({ caller, params, body, set, request }) => {
        const { id: requestId, signal } = contextOf(request);
        const rotated = await service.rotateKey(caller, params.id, body.gracePeriod ?? 0, signal);
        events.rotated({
          key: rotated.apikey.key,
          previousKey: rotated.previous.key,
          userId: rotated.apikey.userId,
          by: caller.by,
          requestId,
        });
        set.status = 201;
        set.headers['cache-control'] = 'no-store';
        return { result: 'success' as const, ...rotated };
      },
      {
        params: ID_PARAMS,
        parse: READ_BODY_IN_TRANSFORM,
        // After the credentials (the scheme's derive runs first): the id, then the body.
        transform: async (context) => {
          assertKeyId(context.params.id);
          context.body = rotateBodyOf(await readOptionalJsonBody(context.request));
        },
        body: 'RotateBody',
        response: { 201: 'RotatedResponse', ...errors, 409: ErrorResponse, 413: ErrorResponse },
        detail: describe(
          'Rotate one of your API keys',
          'A new key with the same name, level and expiry; the old one keeps working for gracePeriod seconds (default 0). The new secret is in this response only.',
        ),
      },
    );
}

/**
 * What a create's schema cannot say of its settings: meta's size, and each permission's and allowed
 * address's own rule.
 */
export function assertSettings(body: { meta?: unknown; permissions?: unknown; allowedIps?: unknown }): void {
  if (body.meta !== undefined) assertMeta(body.meta);
  for (const property of ['permissions', 'allowedIps'] as const) {
    if (body[property] === undefined) continue;
    const problem = settingProblem(property, body[property]);
    if (problem !== undefined) throw new HttpError(400, problem);
  }
}

/** meta is a JSON object of at most META_MAX_BYTES as compact UTF-8 JSON. */
export function assertMeta(meta: unknown): asserts meta is KeyMeta {
  if (
    typeof meta !== 'object' ||
    meta === null ||
    Array.isArray(meta) ||
    Buffer.byteLength(JSON.stringify(meta)) > META_MAX_BYTES
  ) {
    throw new HttpError(400, settingRule('meta') as string);
  }
  // A number beyond a double's range (1e999) parses as Infinity, which JSON would store as null.
  if (!finiteThroughout(meta)) {
    throw new HttpError(400, 'meta holds a number too large to keep (beyond ±1.8e308).');
  }
}

function finiteThroughout(value: unknown): boolean {
  if (typeof value === 'number') return Number.isFinite(value);
  if (typeof value !== 'object' || value === null) return true;
  return Object.values(value).every(finiteThroughout);
}

const UPDATE_PROPERTIES = ['name', 'level', 'expiresIn', ...SETTING_PROPERTIES];

/** The update body checked: a JSON object with at least one known property, each value valid. */
function updateBodyOf(body: unknown, maxExpiresInSeconds: number): KeyPatch {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new HttpError(
      400,
      `The body must be a JSON object with at least one of ${UPDATE_PROPERTIES.join(', ')}.`,
    );
  }
  const fields = body as Record<string, unknown>;
  const names = Object.keys(fields);
  if (names.length === 0) {
    throw new HttpError(400, `Nothing to update: send at least one of ${UPDATE_PROPERTIES.join(', ')}.`);
  }
  const unknown = names.find((name) => !UPDATE_PROPERTIES.includes(name));
  if (unknown !== undefined) {
    throw new HttpError(
      400,
      `Unknown property "${unknown.slice(0, 40)}": the body takes only ${UPDATE_PROPERTIES.join(', ')}.`,
    );
  }
  const rule = (name: string) => new HttpError(400, propertyRule(name, maxExpiresInSeconds) as string);
  const { name, meta, enabled, level, expiresIn, ratelimit, credits } = fields;
  if ('name' in fields) {
    const problem = typeof name === 'string' ? nameProblem(name) : propertyRule('name', maxExpiresInSeconds);
    if (problem !== undefined) throw new HttpError(400, problem);
  }
  if (meta !== undefined && meta !== null) assertMeta(meta);
  for (const property of ['permissions', 'allowedIps'] as const) {
    if (fields[property] == null) continue;
    const problem = settingProblem(property, fields[property]);
    if (problem !== undefined) throw new HttpError(400, problem);
  }
  if ('enabled' in fields && typeof enabled !== 'boolean') throw rule('enabled');
  if ('level' in fields && !isLevel(level)) throw rule('level');
  if (
    'expiresIn' in fields &&
    !(
      typeof expiresIn === 'number' &&
      Number.isInteger(expiresIn) &&
      expiresIn >= 1 &&
      expiresIn <= maxExpiresInSeconds
    )
  ) {
    throw rule('expiresIn');
  }
  if (ratelimit !== undefined && ratelimit !== null && !checkRateLimit(ratelimit)) throw rule('ratelimit');
  if (credits !== undefined && credits !== null && !checkCredits(credits)) throw rule('credits');
  return fields as KeyPatch;
}
const rateLimitSchema = TypeCompiler.Compile(RateLimit);
const creditsSchema = TypeCompiler.Compile(Credits);
const checkRateLimit = (value: unknown) => rateLimitSchema.Check(value);
const checkCredits = (value: unknown) => creditsSchema.Check(value);

/** A `:id` not of the key format is 400, before anything is looked up. */
export function assertKeyId(id: string): void {
  if (!KEY_ID_PATTERN.test(id)) {
    throw new HttpError(400, 'The key id must be "kg_" followed by at least 22 letters and digits.');
  }
}

/** An absent or empty body means the defaults; anything else is read as JSON under the usual rules. */
/** A JSON body that may be absent (no body, or Content-Length 0): then {}. */
export function readOptionalJsonBody(request: Request): Promise<unknown> {
  const length = request.headers.get('content-length');
  if (length === '0' || (length === null && request.body === null)) return Promise.resolve({});
  return readJsonBody(request);
}

function rotateBodyOf(body: unknown): { gracePeriod?: number } {
  if (body === undefined) return {};
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new HttpError(400, 'The body must be a JSON object, optionally with gracePeriod.');
  }
  const extra = Object.keys(body).find((name) => name !== 'gracePeriod');
  if (extra !== undefined) {
    throw new HttpError(400, `Unknown property "${extra.slice(0, 40)}": the body takes only gracePeriod.`);
  }
  const { gracePeriod } = body as { gracePeriod?: unknown };
  if (gracePeriod === undefined) return {};
  if (
    typeof gracePeriod !== 'number' ||
    !Number.isInteger(gracePeriod) ||
    gracePeriod < 0 ||
    gracePeriod > MAX_GRACE_PERIOD_SECONDS
  ) {
    throw new HttpError(
      400,
      `gracePeriod must be an integer number of seconds from 0 to ${MAX_GRACE_PERIOD_SECONDS}.`,
    );
  }
  return { gracePeriod };
}

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 100;

/** `limit` and `cursor`, each at most once; any other parameter or value is a 400. */
export function listQueryOf(url: string) {
  const { limit, after } = pageQueryOf(url, decodeCursor);
  return { limit, after };
}

/**
 * A page's query: `limit` (1..MAX_PAGE_SIZE, default DEFAULT_PAGE_SIZE), `cursor` (what `decode`
 * reads back: undefined is a cursor this service did not give out) and the `others` named, each at
 * most once; any other parameter is a 400.
 */
export function pageQueryOf<Position>(
  url: string,
  decode: (cursor: string) => Position | undefined,
  others: readonly string[] = [],
): { limit: number; after: Position | undefined; others: Map<string, string> } {
  const queryStart = url.indexOf('?');
  const params = new URLSearchParams(queryStart === -1 ? '' : url.slice(queryStart + 1));
  let limit = DEFAULT_PAGE_SIZE;
  let after: Position | undefined;
  const found = new Map<string, string>();
  const seen = new Set<string>();
  for (const [name, value] of params) {
    if (seen.has(name)) throw new HttpError(400, `The query parameter ${name.slice(0, 40)} is given twice.`);
    seen.add(name);
    if (name === 'limit') {
      if (!/^[1-9][0-9]{0,2}$/.test(value) || Number(value) > MAX_PAGE_SIZE) {
        throw new HttpError(400, `limit must be an integer from 1 to ${MAX_PAGE_SIZE}.`);
      }
      limit = Number(value);
    } else if (name === 'cursor') {
      after = decode(value);
      if (after === undefined) throw new HttpError(400, 'The cursor is not one this service gave out.');
    } else if (others.includes(name)) {
      found.set(name, value);
    } else {
      const known = ['limit', 'cursor', ...others];
      throw new HttpError(
        400,
        `Unknown query parameter "${name.slice(0, 40)}": only ${known.slice(0, -1).join(', ')} and ${known.at(-1)}.`,
      );
    }
  }
  return { limit, after, others: found };
}
