// Reads the credentials of each scheme from request headers. "absent" means the scheme's headers
// are not there at all (401); "malformed" means they are there but unusable (403).
export type BearerCredentials =
  | { kind: 'absent' }
  | { kind: 'malformed' }
  | { kind: 'bearer'; token: string };

export type KeyCredentials =
  | { kind: 'absent' }
  | { kind: 'malformed' }
  | { kind: 'key'; key: string; secret: string };

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;
const BASIC = /^Basic[ \t]+([A-Za-z0-9+/]+={0,2})[ \t]*$/i;

export function readBearer(headers: Headers): BearerCredentials {
  const authorization = headers.get('authorization');
  if (authorization === null || !/^bearer(\s|$)/i.test(authorization)) return { kind: 'absent' };
  const match = BEARER.exec(authorization);
  return match ? { kind: 'bearer', token: match[1] as string } : { kind: 'malformed' };
}

/** `Authorization: Basic base64(key:secret)` first; otherwise `X-API-Key` with `X-API-Secret`. */
export function readKeyAndSecret(headers: Headers): KeyCredentials {
  const authorization = headers.get('authorization');
  if (authorization !== null && /^basic(\s|$)/i.test(authorization)) return parseBasic(authorization);
  const key = headers.get('x-api-key');
  const secret = headers.get('x-api-secret');
  if (key === null && secret === null) return { kind: 'absent' };
  if (!key || !secret) return { kind: 'malformed' };
  return { kind: 'key', key, secret };
}

function parseBasic(authorization: string): KeyCredentials {
  const match = BASIC.exec(authorization);
  if (!match) return { kind: 'malformed' };
  const encoded = match[1] as string;
  if (encoded.length % 4 !== 0) return { kind: 'malformed' };
  // Each byte as one character (atob): key ids and secrets are ASCII, so a credential with other
  // bytes matches no key, as it would decoded as UTF-8; a third of Buffer's cost on every request.
  const decoded = atob(encoded);
  const colon = decoded.indexOf(':');
  if (colon <= 0 || colon === decoded.length - 1) return { kind: 'malformed' };
  return { kind: 'key', key: decoded.slice(0, colon), secret: decoded.slice(colon + 1) };
}
