// The key-and-secret scheme (the /key endpoints): `Authorization: Basic`, or X-API-Key and
// X-API-Secret, authenticated by the service like every key (the key cache, one hash, one compare),
// and refused from an address outside the key's allowedIps.
import { readKeyAndSecret } from '../auth/credentials';
import { type AuthScheme, callerScheme } from '../auth/schemes';
import { HttpError } from '../http/errors';
import type { RequestContext } from '../http/request-context';
import type { Address } from '../network/address';
import type { ApiKeyService } from './service';
import { allowedAddressesOf, isConstrained, permissionsOf } from './settings';

export const NEEDS_KEY =
  'This endpoint needs an API key and secret: Authorization: Basic base64(key:secret), or X-API-Key and X-API-Secret.';

/** Told of each successful authentication, as a last use of the key (the usage counter). */
export type LastUseRecorder = { record(keyId: string, outcome: 'authenticated'): void };

export function keyAuth(
  service: Pick<ApiKeyService, 'authenticateKey'>,
  {
    usage,
    clientAddress,
  }: {
    usage?: LastUseRecorder;
    /** The client's address: the TCP peer, or behind TRUSTED_PROXIES the forwarded one. */
    clientAddress?: (request: Request, context: RequestContext) => Address | undefined;
  } = {},
): AuthScheme {
  return callerScheme(async (request, context) => {
    const credentials = readKeyAndSecret(request.headers);
    if (credentials.kind === 'absent') {
      throw new HttpError(401, NEEDS_KEY, { 'www-authenticate': 'Basic realm="keygate"' });
    }
    if (credentials.kind === 'malformed') throw new HttpError(403, 'The API key credentials are malformed.');
    const outcome = await service.authenticateKey(credentials.key, credentials.secret);
    // An expired key is said to be expired only to the holder of its secret, as verify says EXPIRED.
    if (outcome.status === 'expired') throw new HttpError(403, 'The API key has expired.');
    if (outcome.status !== 'valid') throw new HttpError(403, 'The API key or secret is not valid.');
    const { row } = outcome;
    if (row.enabled === false) throw new HttpError(403, 'The API key is disabled.');
    const allowed = allowedAddressesOf(row);
    if (allowed !== undefined && !allowed.contains(clientAddress?.(request, context))) {
      throw new HttpError(403, 'This API key may not be used from this address.');
    }
    // A last use, not a verification: the usage history does not count it.
    usage?.record(row.id, 'authenticated');
    return {
      userId: row.userId,
      level: row.level,
      by: `key:${row.id}`,
      key: {
        id: row.id,
        retiring: row.rotatedAt != null,
        constrained: isConstrained(row),
        permissions: permissionsOf(row),
      },
    };
  });
}
