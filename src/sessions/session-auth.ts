// The console's credential: the `keygate_session` cookie, as the two schemes the console's API needs.
// A user session derives the `caller` a token of that user at the session's level would be; an
// operator session derives the `operator` of the /admin routes. Every change (any method but GET and
// HEAD) must also carry the session's CSRF token in X-Keygate-CSRF and come from the console's own
// origin (PUBLIC_URL's, or the request's Host): else 403, before the body is read.
import { timingSafeEqual } from 'node:crypto';
import { Elysia } from 'elysia';
import type { Operator } from '../admin/operator-auth';
import { callerScheme } from '../auth/schemes';
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

/** An operator's session as the `operator` of the /admin routes, named in audit lines as it was given. */
export function operatorSessionAuth(options: SessionAuthOptions) {
  return new Elysia().derive({ as: 'scoped' }, async ({ request }): Promise<{ operator: Operator }> => {
    const { session } = await consoleSessionOf(request, options);
    if (session.userId !== null) {
      throw new HttpError(
        403,
        "This console session is a user's: the operator's routes need an operator session.",
      );
    }
    const sub = session.by.startsWith('admin:') ? session.by.slice('admin:'.length) : session.by;
    return { operator: { sub, by: session.by } };
  });
}
