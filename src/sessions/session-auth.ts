// The console's credential: the `keygate_session` cookie, as the two schemes the console's API needs.
// A user session derives the `caller` a token of that user at the session's level would be; an
// operator session derives the `operator` of the /admin routes. Every change (any method but GET and
// HEAD) must also carry the session's CSRF token in X-Keygate-CSRF and come from the console's own
// origin (PUBLIC_URL's, or the request's Host): else 403, before the body is read.
import { timingSafeEqual } from 'node:crypto';
import { Elysia } from 'elysia';
import type { Operator } from '../admin/operator-auth';
import { actingFor } from '../admin/service';
import type { Caller } from '../auth/caller';
import { type AuthScheme, callerScheme } from '../auth/schemes';
import { HttpError } from '../http/errors';
import type { SessionService } from './service';
import type { StoredSession } from './store';

export const SESSION_COOKIE = 'keygate_session';
export const CSRF_HEADER = 'x-keygate-csrf';

export type SessionAuthOptions = { sessions: SessionService; publicUrl: string | undefined };

/** The session cookie's value, if the request has one. */
export function sessionTokenOf(request: Request): string | undefined {
  const cookies = request.headers.get('cookie');
  if (cookies === null) return undefined;
  for (const pair of cookies.split(';')) {
    const [name, ...value] = pair.trim().split('=');
    if (name === SESSION_COOKIE) return value.join('=');
  }
  return undefined;
}

/** The request comes from the console's own origin: PUBLIC_URL's when set, else its own Host's. */
export function fromConsoleOrigin(request: Request, publicUrl: string | undefined): boolean {
  const origin = request.headers.get('origin');
  if (origin === null) return false;
  if (publicUrl !== undefined) return origin === publicUrl;
  const host = request.headers.get('host') ?? new URL(request.url).host;
  try {
    return new URL(origin).host === host;
  } catch {
    return false;
  }
}

export const WRONG_ORIGIN = "A console change must come from the console's own origin (its Origin header).";

const SAFE_METHODS = new Set(['GET', 'HEAD']);

/** The live session of the request (401 without one); a change also checked for its origin and CSRF token. */
export async function consoleSessionOf(
  request: Request,
  { sessions, publicUrl }: SessionAuthOptions,
): Promise<{ token: string; session: StoredSession }> {
  const token = sessionTokenOf(request);
  if (token === undefined) throw new HttpError(401, 'This needs a console session: open a console link.');
  const session = await sessions.sessionOf(token);
  if (session === undefined) {
    throw new HttpError(
      401,
      'The console session has ended (logged out, expired or revoked); open a new console link.',
    );
  }
  if (!SAFE_METHODS.has(request.method)) {
    if (!fromConsoleOrigin(request, publicUrl)) throw new HttpError(403, WRONG_ORIGIN);
    const given = Buffer.from(request.headers.get(CSRF_HEADER) ?? '');
    const expected = Buffer.from(sessions.csrfTokenOf(token));
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw new HttpError(403, "A console change must carry the session's CSRF token (X-Keygate-CSRF).");
    }
  }
  return { token, session };
}

/** A user's session as the `caller` of the owner's routes. */
export function userSessionAuth(options: SessionAuthOptions) {
  return callerScheme(async (request) => {
    const { session } = await consoleSessionOf(request, options);
    if (session.userId === null) {
      throw new HttpError(
        403,
        "This is the operator's console session: it acts through the operator's routes.",
      );
    }
    return { userId: session.userId, level: session.level, by: session.by };
  });
}

async function operatorOf(request: Request, options: SessionAuthOptions): Promise<Operator> {
  const { session } = await consoleSessionOf(request, options);
  if (session.userId !== null) {
    throw new HttpError(
      403,
      "This console session is a user's: the operator's routes need an operator session.",
    );
  }
  const sub = session.by.startsWith('admin:') ? session.by.slice('admin:'.length) : session.by;
  return { sub, by: session.by };
}

/** An operator's session as the `operator` of the /admin routes, named in audit lines as it was given. */
export function operatorSessionAuth(options: SessionAuthOptions) {
  return new Elysia().derive(
    { as: 'scoped' },
    async ({ request }): Promise<{ operator: Operator }> => ({
      operator: await operatorOf(request, options),
    }),
  );
}

/** The header in which the operator's page names the user it acts for (the owner's routes have no user in their paths). */
export const ACTING_FOR_HEADER = 'x-keygate-acting-for';

/**
 * An operator's session acting for the user its page names in X-Keygate-Acting-For
 * (admin/service.ts actingFor), as the `caller` of the owner's routes: every action the owner has
 * (rotate included) with the operator's reach, and a key of another user is 404 as for the owner.
 */
export function operatorActingForUserAuth(options: SessionAuthOptions): AuthScheme {
  return new Elysia().derive({ as: 'scoped' }, async ({ request }): Promise<{ caller: Caller }> => {
    const operator = await operatorOf(request, options);
    const userId = request.headers.get(ACTING_FOR_HEADER) ?? '';
    if (!/^[0-9]{1,16}$/.test(userId) || !Number.isSafeInteger(Number(userId))) {
      throw new HttpError(400, `${ACTING_FOR_HEADER} must name the user acted for: a non-negative integer.`);
    }
    return { caller: actingFor(operator, Number(userId)) };
  }) as unknown as AuthScheme;
}
