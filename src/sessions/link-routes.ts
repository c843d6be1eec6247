// The routes that hand out console links: POST /apikeys/sessions/jwt (a user's token: that user, at
// the token's level) and POST /admin/sessions (the operator: any user at level 8, or an operator
// session). Thin: the body's rules here, the link from the session service. The audit line names who
// asked and for whom, never the link.
import { Elysia, t } from 'elysia';
import type { operatorAuth } from '../admin/operator-auth';
import { apiKeyModels, ErrorResponse } from '../apikeys/model';
import { READ_BODY_IN_TRANSFORM, readOptionalJsonBody } from '../apikeys/routes';
import type { AuthScheme } from '../auth/schemes';
import { MAX_LEVEL } from '../core/levels';
import type { Logger } from '../core/log';
import { HttpError } from '../http/errors';
import { contextOf } from '../http/request-context';
import { MAX_SESSION_SECONDS, MIN_SESSION_SECONDS, type SessionService } from './service';

const SessionSeconds = t.Number({
  multipleOf: 1,
  minimum: MIN_SESSION_SECONDS,
  maximum: MAX_SESSION_SECONDS,
  description:
    'How long the console session lasts once the link is opened (default CONSOLE_SESSION_SECONDS).',
});

export const SessionLinkRequest = t.Object(
  { sessionSeconds: t.Optional(SessionSeconds) },
  { additionalProperties: false, title: 'SessionLinkRequest' },
);
/** Exactly one of userId and operator (the route checks it), and optionally sessionSeconds. */
export const AdminSessionRequest = t.Object(
  {
    userId: t.Optional(
      t.Number({
        multipleOf: 1,
        minimum: 0,
        description: "keygate's user id: a console for that user at level 8 (or give operator).",
      }),
    ),
    operator: t.Optional(t.Literal(true, { description: "The operator's console (or give userId)." })),
    sessionSeconds: t.Optional(SessionSeconds),
  },
  { additionalProperties: false, title: 'AdminSessionRequest' },
);
export const SessionLinkResponse = t.Object(
  {
    result: t.Literal('success'),
    url: t.String({
      description:
        'The one-time console link: a path, or an absolute URL with PUBLIC_URL. Its code (in the fragment) opens one session within 5 minutes.',
    }),
    expiresAt: t.String({
      format: 'date-time',
      description: "The link's expiry (ISO 8601 with milliseconds).",
    }),
  },
  { title: 'SessionLinkResponse' },
);

const SECONDS_RULE = `sessionSeconds must be an integer from ${MIN_SESSION_SECONDS} to ${MAX_SESSION_SECONDS}.`;

function sessionSecondsOf(body: Record<string, unknown>): number | undefined {
  const value = body.sessionSeconds;
  if (value === undefined) return undefined;
  if (
    typeof value !== 'number' ||
    !Number.isInteger(value) ||
    value < MIN_SESSION_SECONDS ||
    value > MAX_SESSION_SECONDS
  ) {
    throw new HttpError(400, SECONDS_RULE);
  }
  return value;
}

function objectOf(body: unknown, what: string): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new HttpError(400, `The body must be a JSON object${what}.`);
  }
  return body as Record<string, unknown>;
}

/** The user's own link: `{"sessionSeconds"?}` or no body at all. */
export function userLinkBodyOf(body: unknown): { sessionSeconds?: number } {
  const fields = objectOf(body, ', optionally with sessionSeconds');
  const extra = Object.keys(fields).find((name) => name !== 'sessionSeconds');
  if (extra !== undefined) throw new HttpError(400, `The body has an unknown property "${extra}".`);
  return { sessionSeconds: sessionSecondsOf(fields) };
}

/** The operator's: `{"userId", "sessionSeconds"?}` or `{"operator": true, "sessionSeconds"?}`. */
export function adminLinkBodyOf(body: unknown): { userId: number | null; sessionSeconds?: number } {
  const needs =
    ' with userId (a user’s console) or "operator": true (the operator’s), and optionally sessionSeconds';
  const fields = objectOf(body, needs);
  const extra = Object.keys(fields).find((name) => !['userId', 'operator', 'sessionSeconds'].includes(name));
  if (extra !== undefined) throw new HttpError(400, `The body has an unknown property "${extra}".`);
  const sessionSeconds = sessionSecondsOf(fields);
  if ('userId' in fields === 'operator' in fields)
    throw new HttpError(400, `The body must be a JSON object${needs}.`);
  if ('operator' in fields) {
    if (fields.operator !== true) throw new HttpError(400, 'operator must be true.');
    return { userId: null, sessionSeconds };
  }
  const { userId } = fields;
  if (typeof userId !== 'number' || !Number.isSafeInteger(userId) || userId < 0) {
    throw new HttpError(400, 'userId must be a non-negative integer (a JSON number).');
  }
  return { userId, sessionSeconds };
}

export function sessionLinkRoutes({
  tokenAuth,
  operatorScheme,
  sessions,
  logger,
}: {
  tokenAuth: AuthScheme;
  operatorScheme: ReturnType<typeof operatorAuth>;
  sessions: SessionService;
  logger: Pick<Logger, 'info'>;
}) {
  const responses = {
    201: 'SessionLinkResponse' as const,
    400: ErrorResponse,
    401: ErrorResponse,
    403: ErrorResponse,
    413: ErrorResponse,
    503: ErrorResponse,
  };
  const tokenLinks = new Elysia()
    .use(apiKeyModels)
    .model({ SessionLinkRequest, SessionLinkResponse })
    .use(tokenAuth)
    .post(
      '/apikeys/sessions/jwt',
      async ({ caller, body, set, request }) => {
        const link = await sessions.issueLink(
          { userId: caller.userId, level: caller.level, by: caller.by },
          body.sessionSeconds,
        );
        logger.info('console.link', {
          userId: caller.userId,
          by: caller.by,
          requestId: contextOf(request).id,
        });
        set.status = 201;
        set.headers['cache-control'] = 'no-store';
        return { result: 'success' as const, ...link };
      },
      {
        parse: READ_BODY_IN_TRANSFORM,
        transform: async (context) => {
          context.body = userLinkBodyOf(await readOptionalJsonBody(context.request));
        },
        body: 'SessionLinkRequest',
        response: responses,
        detail: {
          summary: 'A console link for your user (jwt)',
          description:
            "Authenticated by a JSON Web Token. A one-time link to keygate's console for the token's user, at the token's level: give it to your logged-in user. Its code is valid 5 minutes and opens one session.",
          security: [{ bearer: [] }],
          tags: ['Console'],
        },
      },
    );
  const operatorLinks = new Elysia()
    .use(apiKeyModels)
    .model({ AdminSessionRequest, SessionLinkResponse })
    .use(operatorScheme)
    .post(
      '/admin/sessions',
      async ({ operator, body, set, request }) => {
        const { userId, sessionSeconds } = adminLinkBodyOf(body);
        const link = await sessions.issueLink({ userId, level: MAX_LEVEL, by: operator.by }, sessionSeconds);
        logger.info('console.link', {
          ...(userId === null ? { operator: true } : { userId }),
          by: operator.by,
          requestId: contextOf(request).id,
        });
        set.status = 201;
        set.headers['cache-control'] = 'no-store';
        return { result: 'success' as const, ...link };
      },
      {
        parse: READ_BODY_IN_TRANSFORM,
        transform: async (context) => {
          const body = await readOptionalJsonBody(context.request);
          adminLinkBodyOf(body);
          context.body = body as typeof AdminSessionRequest.static;
        },
        body: 'AdminSessionRequest',
        response: responses,
        detail: {
          summary: 'A console link for a user, or for the operator',
          description:
            'Needs a token whose scope holds JWT_ADMIN_SCOPE. With userId: a one-time link to that user\'s console at level 8; with "operator": true: to the operator\'s console. Its code is valid 5 minutes and opens one session.',
          security: [{ bearer: [] }],
          tags: ['Console'],
        },
      },
    );
  return new Elysia().use(tokenLinks).use(operatorLinks);
}
