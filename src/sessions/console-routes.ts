// The console's own routes under /console: the page and its files, the session (exchange a link's
// code for the cookie, who am I and what may I do, logout), and the console's API under /console/api:
// the owner's key and usage routes and the operator's routes, the very same route builders and
// services as the API's, authenticated by the session cookie (session-auth.ts) instead of a token.
import { type AnyElysia, Elysia } from 'elysia';
import { ErrorResponse } from '../apikeys/model';
import type { UserIdMode } from '../auth/subjects';
import { MAX_LEVEL } from '../core/levels';
import { readJsonBody } from '../http/body';
import { HttpError } from '../http/errors';
import type { PolicyService } from '../policies/service';
import { type ConsolePageOptions, consolePage } from './console-page';
import type { SessionService } from './service';
import { consoleSessionOf, fromConsoleOrigin, SESSION_COOKIE, WRONG_ORIGIN } from './session-auth';
import type { StoredSession } from './store';

export type ConsoleRoutesOptions = {
  sessions: SessionService;
  policies: Pick<PolicyService, 'policyOf'>;
  page: ConsolePageOptions;
  publicUrl: string | undefined;
  basePath: string;
  maxExpiresInSeconds: number;
  userIds: UserIdMode;
  /** The API the page calls, mounted under /console/api (each authenticated by the session). */
  api: readonly AnyElysia[];
  /** The owner's routes for the operator acting for one user (session-auth.ts), under /console/api/operator. */
  operatorApi: readonly AnyElysia[];
};

const hidden = { detail: { hide: true } };

export function consoleRoutes({
  sessions,
  policies,
  page,
  publicUrl,
  basePath,
  maxExpiresInSeconds,
  userIds,
  api,
  operatorApi,
}: ConsoleRoutesOptions) {
  const cookiePath = `${basePath}/console`;
  const secure = publicUrl?.startsWith('https:') ? '; Secure' : '';
  const cookie = (value: string, maxAge: number) =>
    `${SESSION_COOKIE}=${value}; Path=${cookiePath}; Max-Age=${maxAge}; HttpOnly; SameSite=Strict${secure}`;

  /** What the page shows and offers: who, until when, and the rules that bound what it may do. */
  const sessionView = async (token: string, session: StoredSession) => {
    const policy = session.userId === null ? undefined : await policies.policyOf(session.userId);
    const maxLevel = Math.min(session.level, policy?.maxLevel ?? MAX_LEVEL);
    return {
      result: 'success' as const,
      session: {
        kind: session.userId === null ? ('operator' as const) : ('user' as const),
        userId: session.userId,
        level: session.level,
        by: session.by,
        expiresAt: new Date(session.expiresAt).toISOString(),
        csrfToken: sessions.csrfTokenOf(token),
      },
      rules: {
        // The highest level a key may be given: the session's, within the user's policy.
        maxLevel,
        // What the keys may be granted: the policy's permissions, or null for any.
        permissions: policy?.permissions ?? null,
        maxExpiresInSeconds,
        userIds,
      },
    };
  };

  return new Elysia()
    .use(consolePage(page))
    .post(
      '/console/api/session',
      async ({ request, set }) => {
        // No session yet, so no CSRF token: the origin alone guards the exchange.
        if (!fromConsoleOrigin(request, publicUrl)) throw new HttpError(403, WRONG_ORIGIN);
        const body = await readJsonBody(request);
        const code = (body as { code?: unknown } | null)?.code;
        if (
          typeof body !== 'object' ||
          body === null ||
          typeof code !== 'string' ||
          Object.keys(body).length !== 1
        ) {
          throw new HttpError(400, 'The body must be a JSON object with the link\'s code: {"code": "…"}.');
        }
        const { token, session } = await sessions.exchange(code);
        set.headers['set-cookie'] = cookie(token, session.sessionSeconds);
        set.headers['cache-control'] = 'no-store';
        return sessionView(token, session);
      },
      { parse: 'none', response: { 400: ErrorResponse, 403: ErrorResponse }, ...hidden },
    )
    .get(
      '/console/api/session',
      async ({ request, set }) => {
        const { token, session } = await consoleSessionOf(request, { sessions, publicUrl });
        set.headers['cache-control'] = 'no-store';
        return sessionView(token, session);
      },
      hidden,
    )
    .delete(
      '/console/api/session',
      async ({ request, set }) => {
        const { token } = await consoleSessionOf(request, { sessions, publicUrl });
        await sessions.logout(token);
        set.headers['set-cookie'] = cookie('', 0);
        set.status = 204;
      },
      hidden,
    )
    .group('/console/api', (group) => {
      for (const routes of api) group.use(routes);
      return group;
    })
    .group('/console/api/operator', (group) => {
      for (const routes of operatorApi) group.use(routes);
      return group;
    });
}
