// The two authentication schemes as Elysia plugins. Each derives `caller` for the routes that use
// it, before the body is validated: absent credentials are 401, present but invalid ones 403.
import { Elysia } from 'elysia';
import type { ApiKeyService, Caller } from '../apikeys/service';
import { noteTokenRefusal } from '../http/edge';
import { HttpError } from '../http/errors';
import { readBearer, readKeyAndSecret } from './credentials';
import type { JwtAuthority } from './jwt';

export type AuthScheme = ReturnType<typeof jwtAuth> | ReturnType<typeof keyAuth>;

export const NEEDS_TOKEN = 'This endpoint needs a JSON Web Token: Authorization: Bearer <token>.';
export const NEEDS_KEY =
  'This endpoint needs an API key and secret: Authorization: Basic base64(key:secret), or X-API-Key and X-API-Secret.';

export function jwtAuth(jwt: JwtAuthority) {
  return new Elysia().derive({ as: 'scoped' }, async ({ request }): Promise<{ caller: Caller }> => {
    const credentials = readBearer(request.headers);
    if (credentials.kind === 'absent') {
      throw new HttpError(401, NEEDS_TOKEN, { 'www-authenticate': 'Bearer realm="keygate"' });
    }
    if (credentials.kind === 'malformed') throw new HttpError(403, 'The Authorization header is malformed.');
    const check = await jwt.verify(credentials.token);
    if (!check.ok) {
      noteTokenRefusal(request, check.reason);
      throw new HttpError(403, 'The token is not valid.');
    }
    const { userId, level } = check.identity;
    return { caller: { userId, level, by: `jwt:${userId}` } };
  });
}

export function keyAuth(service: Pick<ApiKeyService, 'authenticateKey'>) {
  return new Elysia().derive({ as: 'scoped' }, async ({ request }): Promise<{ caller: Caller }> => {
    const credentials = readKeyAndSecret(request.headers);
    if (credentials.kind === 'absent') {
      throw new HttpError(401, NEEDS_KEY, { 'www-authenticate': 'Basic realm="keygate"' });
    }
    if (credentials.kind === 'malformed') throw new HttpError(403, 'The API key credentials are malformed.');
    const outcome = await service.authenticateKey(credentials.key, credentials.secret);
    if (outcome.status !== 'valid') throw new HttpError(403, 'The API key or secret is not valid.');
    const { row } = outcome;
    return { caller: { userId: row.userId, level: row.level, by: `key:${row.id}` } };
  });
}
