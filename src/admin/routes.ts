// The operator's routes (/admin): any user's keys, for the operator's own services. Thin handlers
// over the admin service; checks in the other routes' order: the operator's credential (the scheme's
// derive) → the path's format → the body or query → 404 → the rules' 403 and 409. Every change is
// told to the key events (audit line, metrics) with `by` = `admin:<sub>`.
import { Elysia, t } from 'elysia';
import type { KeyEvents } from '../apikeys/audit';
import { decodeCursor, encodeCursor } from '../apikeys/cursor';
import {
  apiKeyModels,
  CreatedResponse,
  ErrorResponse,
  KeySummary,
  UserPolicy,
  WholeNumber,
} from '../apikeys/model';
import {
  assertKeyId,
  assertSettings,
  createBodyOptions,
  listQueryOf,
  pageQueryOf,
  READ_BODY_IN_TRANSFORM,
  updateBodyOptions,
} from '../apikeys/routes';
import type { Clock } from '../core/clock';
import { readJsonBody } from '../http/body';
import { HttpError } from '../http/errors';
import { QUERY_PARAMETERS } from '../http/openapi';
import { contextOf } from '../http/request-context';
import { policyBodyProblem } from '../policies/model';
import type { PolicyInput, PolicyService } from '../policies/service';
import { UsageBucket, usageModels } from '../usage/model';
import { bucketsView, usageQueryOf } from '../usage/routes';
import type { AdminAudit } from './audit';
import type { operatorAuth } from './operator-auth';
import type { AdminService, KeyFilter } from './service';

export type AdminRoutesOptions = {
  auth: ReturnType<typeof operatorAuth>;
  admin: AdminService;
  policies: PolicyService;
  events: KeyEvents;
  audit: AdminAudit;
  maxExpiresInSeconds: number;
  clock: Clock;
};

const KEY_PARAMS = t.Object({ id: t.String({ description: 'The `key` of the API key.' }) });
const USER_PARAMS = t.Object({
  userId: t.String({ description: "keygate's user id: a non-negative integer, in decimal digits." }),
});
const errors = {
  400: ErrorResponse,
  401: ErrorResponse,
  403: ErrorResponse,
  404: ErrorResponse,
  503: ErrorResponse,
};

const describe = (summary: string, description: string, extra: Record<string, unknown> = {}) => ({
  summary,
  description: `Needs a token whose scope holds JWT_ADMIN_SCOPE. ${description}`,
  security: [{ bearer: [] }],
  tags: ['Operator'],
  ...extra,
});

const PAGE_PARAMETERS = [
  { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 100 } },
  { name: 'cursor', in: 'query', required: false, schema: { type: 'string' } },
];
const USAGE_PARAMETERS = [
  {
    name: 'granularity',
    in: 'query',
    required: false,
    schema: { type: 'string', enum: ['hour', 'day'], default: 'hour' },
  },
  { name: 'since', in: 'query', required: false, schema: { type: 'string' } },
  { name: 'until', in: 'query', required: false, schema: { type: 'string' } },
];

export const RevokedAllResponse = t.Object(
  { result: t.Literal('success'), deleted: WholeNumber() },
  { title: 'RevokedAllResponse' },
);
export const PolicyResponse = t.Object(
  { result: t.Literal('success'), policy: UserPolicy },
  { title: 'PolicyResponse' },
);
export const PutPolicyRequest = t.Object(
  {
    ratelimit: UserPolicy.properties.ratelimit,
    credits: UserPolicy.properties.credits,
    maxKeys: UserPolicy.properties.maxKeys,
    maxLevel: UserPolicy.properties.maxLevel,
    permissions: t.Optional(UserPolicy.properties.permissions),
  },
  { additionalProperties: false, title: 'PutPolicyRequest' },
);
export const SubjectResponse = t.Object(
  { result: t.Literal('success'), userId: WholeNumber() },
  { title: 'SubjectResponse' },
);
export const UserUsageResponse = t.Object(
  {
    result: t.Literal('success'),
    userId: WholeNumber(),
    granularity: t.Union([t.Literal('hour'), t.Literal('day')]),
    usage: t.Array(UsageBucket, { description: 'Ascending; only buckets with a count.' }),
  },
  { title: 'UserUsageResponse' },
);

const NEXT_CURSOR = t.Union([t.String(), t.Null()], {
  description: 'Pass as `cursor` for the next page; null on the last page.',
});
export const UserSummary = t.Object(
  {
    userId: WholeNumber(),
    subject: t.Optional(
      t.String({ description: 'With JWT_USER_IDS=mapped: the token subject the user id was given to.' }),
    ),
    keys: t.Number({ multipleOf: 1, description: 'Live keys.' }),
    lastUsedAt: t.Union([t.String(), t.Null()], {
      description:
        "The latest last use of the user's live keys (ISO 8601 with milliseconds); null: none used.",
    }),
    policy: t.Optional(UserPolicy),
  },
  { title: 'UserSummary' },
);
export const UserListResponse = t.Object(
  { result: t.Literal('success'), users: t.Array(UserSummary), nextCursor: NEXT_CURSOR },
  { title: 'UserListResponse' },
);
export const KeySearchResponse = t.Object(
  { result: t.Literal('success'), apikeys: t.Array(KeySummary), nextCursor: NEXT_CURSOR },
  { title: 'KeySearchResponse' },
);
const CountsByCode = t.Record(t.String(), WholeNumber(), {
  description: 'Verification answers by their code (VALID, NOT_FOUND, …); codes never given are absent.',
});
export const OverviewResponse = t.Object(
  {
    result: t.Literal('success'),
    keys: t.Number({ multipleOf: 1, description: 'Live keys.' }),
    created: t.Object(
      { day: WholeNumber(), month: WholeNumber() },
      { description: 'Keys created (rotations included, keys deleted since too).' },
    ),
    verifications: t.Object({ day: CountsByCode, month: CountsByCode }),
    topKeys: t.Array(
      t.Object({ key: t.String(), userId: WholeNumber(), name: t.String(), valid: WholeNumber() }),
      { description: 'The ten keys with the most VALID verifications over the last 24 hours; none with 0.' },
    ),
    topUsers: t.Array(t.Object({ userId: WholeNumber(), valid: WholeNumber() }), {
      description: 'The ten users whose keys had the most VALID verifications over the last 24 hours.',
    }),
  },
  {
    title: 'OverviewResponse',
    description:
      'day: the last 24 hours, month: the last 30 days, both in whole UTC hours, the current one included.',
  },
);

/** The users list's cursor: base64url of "u<userId>" of the page's last user; anything else is refused. */
const encodeUserCursor = (userId: number) => Buffer.from(`u${userId}`).toString('base64url');
function decodeUserCursor(cursor: string): number | undefined {
  if (!/^[A-Za-z0-9_-]{1,40}$/.test(cursor)) return undefined;
  const text = Buffer.from(cursor, 'base64url').toString('latin1');
  const match = /^u(0|[1-9][0-9]{0,15})$/.exec(text);
  if (!match || encodeUserCursor(Number(match[1])) !== cursor) return undefined;
  const userId = Number(match[1]);
  return Number.isSafeInteger(userId) ? userId : undefined;
}

export const MAX_SEARCH_LENGTH = 128;
const SEARCH_RULE = `q must be 1 to ${MAX_SEARCH_LENGTH} characters: a key id prefix (kg_…) or a part of the name.`;

/** `q`: a key id prefix when it starts with kg_, else a part of the name (ASCII letters without case). */
function keyFilterOf(q: string | undefined): KeyFilter {
  if (q === undefined) return undefined;
  const length = [...q].length;
  if (length === 0 || length > MAX_SEARCH_LENGTH) throw new HttpError(400, SEARCH_RULE);
  if (q.startsWith('kg_')) {
    if (!/^kg_[A-Za-z0-9]*$/.test(q)) {
      throw new HttpError(
        400,
        'A key id prefix (q starting with kg_) has only letters and digits after kg_.',
      );
    }
    return { idPrefix: q };
  }
  return { namePart: q.replace(/[A-Z]/g, (letter) => letter.toLowerCase()) };
}

/** `:userId` is keygate's user id: a non-negative safe integer in decimal digits, without leading zeros. */
export function userIdOf(text: string): number {
  const value = /^(0|[1-9][0-9]{0,15})$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value)) {
    throw new HttpError(400, 'The user id in the path must be a non-negative integer in decimal digits.');
  }
  return value;
}

/** `iss` and `sub`, each exactly once; anything else is a 400. */
function subjectQueryOf(url: string): { iss: string; sub: string } {
  const queryStart = url.indexOf('?');
  const params = new URLSearchParams(queryStart === -1 ? '' : url.slice(queryStart + 1));
  const found: Record<string, string> = {};
  for (const [name, value] of params) {
    if (name !== 'iss' && name !== 'sub') {
      throw new HttpError(400, `Unknown query parameter "${name.slice(0, 40)}": only iss and sub.`);
    }
    if (name in found) throw new HttpError(400, `The query parameter ${name} is given twice.`);
    found[name] = value;
  }
  if (found.iss === undefined || found.sub === undefined || found.sub === '') {
    throw new HttpError(400, 'The query needs iss (empty for tokens without one) and a non-empty sub.');
  }
  return { iss: found.iss, sub: found.sub };
}

export function adminRoutes({
  auth,
  admin,
  policies,
  events,
  audit,
  maxExpiresInSeconds,
  clock,
}: AdminRoutesOptions) {
  return new Elysia()
    .use(apiKeyModels)
    .use(usageModels)
    .model({
      RevokedAllResponse,
      UserUsageResponse,
      PolicyResponse,
      PutPolicyRequest,
      UserPolicy,
      SubjectResponse,
      UserSummary,
      UserListResponse,
      KeySearchResponse,
      OverviewResponse,
    })
    .use(auth)
    .get(
      '/admin/users',
      async ({ request }) => {
        const { limit, after } = pageQueryOf(request.url, decodeUserCursor);
        const page = await admin.listUsers({ limit, afterUserId: after });
        return {
          result: 'success' as const,
          users: page.items,
          nextCursor: page.next === null ? null : encodeUserCursor(page.next),
        };
      },
      {
        response: { 200: 'UserListResponse', ...errors },
        detail: describe(
          'List the users',
          'The users that hold live keys or a policy, ascending user id, paged: `limit` 1–100 (default 50) and `cursor` from the previous page.',
          { parameters: PAGE_PARAMETERS },
        ),
      },
    )
    .get(
      '/admin/apikeys',
      async ({ request }) => {
        const { limit, after, others } = pageQueryOf(request.url, decodeCursor, ['q']);
        const page = await admin.searchKeys(keyFilterOf(others.get('q')), { limit, after });
        return {
          result: 'success' as const,
          apikeys: page.items,
          nextCursor: page.next === null ? null : encodeCursor(page.next),
        };
      },
      {
        response: { 200: 'KeySearchResponse', ...errors },
        detail: describe(
          'Find API keys',
          "Every user's live keys, newest first, paged as a user's list. `q` (1–128 characters) filters them: starting with `kg_` it is a key id prefix, else a part of the name, letters A–Z matched without case; `%` and `_` are characters like any other.",
          {
            parameters: [
              ...PAGE_PARAMETERS,
              {
                name: 'q',
                in: 'query',
                required: false,
                schema: { type: 'string', minLength: 1, maxLength: MAX_SEARCH_LENGTH },
              },
            ],
          },
        ),
      },
    )
    .get(
      '/admin/overview',
      async ({ request }) => {
        if (new URL(request.url).search !== '') {
          throw new HttpError(400, 'The overview takes no query parameters.');
        }
        return { result: 'success' as const, ...(await admin.overview()) };
      },
      {
        response: { 200: 'OverviewResponse', ...errors },
        detail: describe(
          'Overview',
          'Keys alive; keys created and verifications by code over the last 24 hours and 30 days; the ten keys and ten users with the most VALID verifications over the last 24 hours. Every verify and forward-auth answer with a code counts (tokens and unknown keys too), a forward-auth 401 without a credential and NO_RULE do not.',
        ),
      },
    )
    .get(
      '/admin/users/:userId/apikeys',
      async ({ operator, params, request }) => {
        const userId = userIdOf(params.userId);
        const page = await admin.listKeys(operator, userId, listQueryOf(request.url));
        return {
          result: 'success' as const,
          apikeys: page.items,
          nextCursor: page.next === null ? null : encodeCursor(page.next),
        };
      },
      {
        params: USER_PARAMS,
        response: { 200: 'KeyListResponse', ...errors },
        detail: describe(
          "List a user's API keys",
          "The user's live keys at every level, newest first, paged as the owner's list.",
          { parameters: PAGE_PARAMETERS },
        ),
      },
    )
    .post(
      '/admin/users/:userId/apikeys',
      async ({ operator, params, body, set, request }) => {
        assertSettings(body);
        const { id: requestId, signal } = contextOf(request);
        const apikey = await admin.createKey(operator, userIdOf(params.userId), body, signal);
        events.created({ key: apikey.key, userId: apikey.userId, by: operator.by, requestId });
        set.status = 201;
        set.headers['cache-control'] = 'no-store';
        return { result: 'success' as const, apikey };
      },
      {
        params: USER_PARAMS,
        ...createBodyOptions(maxExpiresInSeconds, (params) => userIdOf(params.userId as string)),
        response: { 201: CreatedResponse, ...errors, 409: ErrorResponse, 413: ErrorResponse },
        detail: describe(
          'Create an API key for a user',
          "The create body and settings, at any level (up to the user's policy's maxLevel). The secret is in this response only.",
        ),
      },
    )
    .delete(
      '/admin/users/:userId/apikeys',
      async ({ operator, params, request }) => {
        const userId = userIdOf(params.userId);
        const { id: requestId, signal } = contextOf(request);
        const deleted = await admin.revokeAllKeys(operator, userId, signal);
        events.revokedAll({ userId, count: deleted, by: operator.by, requestId });
        return { result: 'success' as const, deleted };
      },
      {
        params: USER_PARAMS,
        response: { 200: 'RevokedAllResponse', ...errors },
        detail: describe(
          'Revoke every key of a user',
          'In one transaction; every replica refuses them within a second. `deleted` counts the keys that were live.',
        ),
      },
    )
    .get(
      '/admin/users/:userId/usage',
      async ({ params, request }) => {
        const userId = userIdOf(params.userId);
        const query = usageQueryOf(request.url, clock());
        return {
          result: 'success' as const,
          userId,
          granularity: query.granularity,
          usage: bucketsView(await admin.userUsage(userId, query)),
        };
      },
      {
        params: USER_PARAMS,
        response: { 200: 'UserUsageResponse', ...errors },
        detail: describe(
          "A user's usage history",
          "The usage buckets of the user's keys, summed; the query as for one key.",
          { [QUERY_PARAMETERS]: USAGE_PARAMETERS },
        ),
      },
    )
    .put(
      '/admin/users/:userId/policy',
      async ({ operator, params, body, request }) => {
        const userId = userIdOf(params.userId);
        const { id: requestId, signal } = contextOf(request);
        const policy = await policies.putPolicy(userId, body, operator.by, signal);
        audit.policySet({ userId, by: operator.by, requestId });
        return { result: 'success' as const, policy };
      },
      {
        params: USER_PARAMS,
        parse: READ_BODY_IN_TRANSFORM,
        transform: async (context) => {
          userIdOf(context.params.userId);
          const body = await readJsonBody(context.request);
          const problem = policyBodyProblem(body);
          if (problem !== undefined) throw new HttpError(400, problem);
          context.body = body as PolicyInput;
        },
        body: 'PutPolicyRequest',
        response: { 200: 'PolicyResponse', ...errors, 413: ErrorResponse },
        detail: describe(
          "Set a user's policy",
          "The four limits required, null for none: a rate limit and credits all the user's keys share (on top of each key's own and RATE_LIMIT), maxKeys (replaces MAX_KEYS_PER_USER for the user) and maxLevel (the highest level of the user's keys, on every route, rotations included); and optionally permissions (absent: null), which bound every grant of permissions to the user's keys but the operator's. Credits are set now: their refill clock starts.",
        ),
      },
    )
    .get(
      '/admin/users/:userId/policy',
      async ({ params }) => ({
        result: 'success' as const,
        policy: await policies.getPolicy(userIdOf(params.userId)),
      }),
      {
        params: USER_PARAMS,
        response: { 200: 'PolicyResponse', ...errors },
        detail: describe("Get a user's policy", 'All five null when the user has none.'),
      },
    )
    .delete(
      '/admin/users/:userId/policy',
      async ({ operator, params, set, request }) => {
        const userId = userIdOf(params.userId);
        const { id: requestId, signal } = contextOf(request);
        await policies.deletePolicy(userId, operator.by, signal);
        audit.policyDeleted({ userId, by: operator.by, requestId });
        set.status = 204;
      },
      {
        params: USER_PARAMS,
        response: { 204: t.Void(), ...errors },
        detail: describe("Remove a user's policy", '404 when the user has none.'),
      },
    )
    .get(
      '/admin/subjects',
      async ({ request }) => {
        const { iss, sub } = subjectQueryOf(request.url);
        return { result: 'success' as const, userId: await admin.userIdOfSubject(iss, sub) };
      },
      {
        response: { 200: 'SubjectResponse', ...errors },
        detail: describe(
          'Find the user id of a subject',
          'With JWT_USER_IDS=mapped: the user id keygate gave the token subject `sub` of the issuer `iss` (empty for tokens without iss); 404 when it has none. Asking never gives one.',
          {
            parameters: [
              { name: 'iss', in: 'query', required: true, schema: { type: 'string' } },
              { name: 'sub', in: 'query', required: true, schema: { type: 'string' } },
            ],
          },
        ),
      },
    )
    .get(
      '/admin/apikeys/:id',
      async ({ operator, params }) => {
        assertKeyId(params.id);
        return { result: 'success' as const, apikey: await admin.getKey(operator, params.id) };
      },
      {
        params: KEY_PARAMS,
        response: { 200: 'KeyResponse', ...errors },
        detail: describe(
          'Get any API key',
          "Any user's live key, at any level; 404 for an expired or unknown key.",
        ),
      },
    )
    .patch(
      '/admin/apikeys/:id',
      async ({ operator, params, body, request }) => {
        const { id: requestId, signal } = contextOf(request);
        const { apikey, row, changed } = await admin.updateKey(operator, params.id, body, signal);
        events.updated({ key: row.id, userId: row.userId, by: operator.by, requestId, changed });
        return { result: 'success' as const, apikey };
      },
      {
        params: KEY_PARAMS,
        ...updateBodyOptions(maxExpiresInSeconds),
        response: { 200: 'KeyResponse', ...errors, 413: ErrorResponse },
        detail: describe(
          'Update any API key',
          "The update body, at any level (up to the user's policy's maxLevel).",
        ),
      },
    )
    .delete(
      '/admin/apikeys/:id',
      async ({ operator, params, set, request }) => {
        assertKeyId(params.id);
        const { id: requestId, signal } = contextOf(request);
        const row = await admin.revokeKey(operator, params.id, signal);
        events.deleted({ key: row.id, userId: row.userId, by: operator.by, requestId });
        set.status = 204;
      },
      {
        params: KEY_PARAMS,
        response: { 204: t.Void(), ...errors },
        detail: describe('Delete any API key', '404 for an expired or unknown key.'),
      },
    )
    .get(
      '/admin/apikeys/:id/usage',
      async ({ params, request }) => {
        assertKeyId(params.id);
        const query = usageQueryOf(request.url, clock());
        return {
          result: 'success' as const,
          key: params.id,
          granularity: query.granularity,
          usage: bucketsView(await admin.keyUsage(params.id, query)),
        };
      },
      {
        params: KEY_PARAMS,
        response: { 200: 'UsageResponse', ...errors },
        detail: describe(
          'Usage history of any API key',
          'As the owner sees it; 404 for an expired or unknown key.',
          {
            [QUERY_PARAMETERS]: USAGE_PARAMETERS,
          },
        ),
      },
    );
}
