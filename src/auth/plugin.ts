// The two authentication schemes as Elysia plugins. Each derives `caller` for the routes that use
// it, before the body is validated: absent credentials are 401, present but invalid ones 403.
import { Elysia } from 'elysia';
import type { ApiKeyService, Caller } from '../apikeys/service';
import { HttpError } from '../http/errors';
import { readBearer, readKeyAndSecret } from './credentials';
import type { JwtAuthority } from './jwt';

export type AuthScheme = ReturnType<typeof jwtAuth> | ReturnType<typeof keyAuth>;

export function jwtAuth(jwt: JwtAuthority) {
  return new Elysia().derive({ as: 'scoped' }, async ({ request }): Promise<{ caller: Caller }> => {
    const credentials = readBearer(request.headers);
    if (credentials.kind === 'absent') {
      throw new HttpError(401, 'This endpoint needs a JSON Web Token: Authorization: Bearer <token>.', {
        'www-authenticate': 'Bearer realm="keygate"',
      });
    }
    if (credentials.kind === 'malformed') throw new HttpError(403, 'The Authorization header is malformed.');
    const caller = await jwt.verify(credentials.token);
    if (!caller) throw new HttpError(403, 'The token is not valid.');
    return { caller };
  });
}

export function keyAuth(service: Pick<ApiKeyService, 'verifyKeySecret'>) {
  return new Elysia().derive({ as: 'scoped' }, ({ request }): { caller: Caller } => {
    const credentials = readKeyAndSecret(request.headers);
    if (credentials.kind === 'absent') {
      throw new HttpError(
        401,
        'This endpoint needs an API key and secret: Authorization: Basic base64(key:secret), or X-API-Key and X-API-Secret.',
        { 'www-authenticate': 'Basic realm="keygate"' },
      );
    }
    if (credentials.kind === 'malformed') throw new HttpError(403, 'The API key credentials are malformed.');
    const caller = service.verifyKeySecret(credentials.key, credentials.secret);
    if (!caller) throw new HttpError(403, 'The API key or secret is not valid.');
    return { caller };
  });
}
