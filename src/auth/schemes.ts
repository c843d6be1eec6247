// The authentication schemes as Elysia plugins. Each derives `caller` for the routes that use it,
// before the body is read: absent credentials are 401, present but invalid ones 403. The JWT scheme
// is here; the key-and-secret scheme (apikeys/key-auth.ts) is built on `callerScheme` too.
import { Elysia } from 'elysia';
import { HttpError } from '../http/errors';
import { contextOf, type RequestContext } from '../http/request-context';
import type { Caller } from './caller';
import { readBearer } from './credentials';
import { type TokenUsers, tokenRefusalSentence } from './token-users';

/** A scheme: the routes that use it see the authenticated `caller`. */
export type AuthScheme = ReturnType<typeof callerScheme>;

/** A scheme from the function that authenticates a request's caller (or throws its 401/403). */
export function callerScheme(authenticate: (request: Request, context: RequestContext) => Promise<Caller>) {
  return new Elysia().derive(
    { as: 'scoped' },
    async ({ request }): Promise<{ caller: Caller }> => ({
      caller: await authenticate(request, contextOf(request)),
    }),
  );
}

export const NEEDS_TOKEN = 'This endpoint needs a JSON Web Token: Authorization: Bearer <token>.';

export function jwtAuth(tokens: TokenUsers): AuthScheme {
  return callerScheme(async (request, context) => {
    const credentials = readBearer(request.headers);
    if (credentials.kind === 'absent') {
      throw new HttpError(401, NEEDS_TOKEN, { 'www-authenticate': 'Bearer realm="keygate"' });
    }
    if (credentials.kind === 'malformed') throw new HttpError(403, 'The Authorization header is malformed.');
    const check = await tokens.verify(credentials.token);
    if (!check.ok) {
      context.tokenRefusal = check.reason;
      throw new HttpError(403, tokenRefusalSentence(check.reason));
    }
    const { userId, level, by } = check.user;
    return { userId, level, by };
  });
}
