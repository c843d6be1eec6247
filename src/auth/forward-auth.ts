// Forward-auth for reverse proxies (nginx auth_request, Traefik forwardAuth, Caddy forward_auth, Envoy
// ext_authz): `/forward-auth` and `/forward-auth/<anything>`, any method, the body never read. The
// credential is the request's own headers, as for the /jwt and /key endpoints.
import { Elysia } from 'elysia';
import { apiKeyModels, ErrorResponse } from '../apikeys/model';
import { HttpError } from '../http/errors';
import { readBearer, readKeyAndSecret } from './credentials';
import type { OnVerdict, Principal, Verdict, Verifier } from './verification';

/** The first path segment; the edge lets bodies of any declared size through here (they are never read). */
export const FORWARD_AUTH_PATH = '/forward-auth';

const NO_CREDENTIALS =
  'Send a credential: Authorization: Bearer <token>, Authorization: Basic base64(key:secret), or X-API-Key and X-API-Secret.';

export function forwardAuthRoutes(verifier: Verifier, onVerdict?: OnVerdict) {
  const handler = async ({ request }: { request: Request }) => {
    const verdict = await verdictOf(verifier, request, onVerdict);
    if (!verdict.valid) throw new HttpError(403, refusal(verdict));
    return new Response(JSON.stringify({ result: 'success', principal: verdict.principal }), {
      status: 200,
      headers: allowHeaders(verdict.principal),
    });
  };
  const options = {
    // The body is never read, whatever the method and its Content-Type.
    parse: 'none' as const,
    response: {
      200: 'ForwardAuthResponse' as const,
      400: ErrorResponse,
      401: ErrorResponse,
      403: ErrorResponse,
    },
    detail: {
      summary: 'Forward-auth for a reverse proxy (any method)',
      description:
        'Allows (200, identity in X-Keygate-* headers) or denies (401 without a credential, 403 for an invalid one or a level below minLevel). Query: optional minLevel=0..8, nothing else.',
      security: [{ bearer: [] }, { basic: [] }, { apiKey: [], apiSecret: [] }] as Record<string, string[]>[],
      tags: ['Verification'],
    },
  };
  // Documented once, on the any-method route; the other two are hidden from the document.
  const hidden = { ...options, detail: { ...options.detail, hide: true } };
  return (
    new Elysia()
      .use(apiKeyModels)
      .all(FORWARD_AUTH_PATH, handler, options)
      // The same handler for GET, the method proxies use, as a route of its own: Elysia finds a GET
      // route in its static table, where an `all` route costs ~2.7 µs more a request (bench/RESULTS.md).
      .get(FORWARD_AUTH_PATH, handler, hidden)
      // "/forward-auth/*" is not an OpenAPI path template.
      .all(`${FORWARD_AUTH_PATH}/*`, handler, hidden)
  );
}

/**
 * Credentials first (401, 403), then the query (400), then the level (403). At once for a key in the
 * key cache (no promise on the hot path), else a promise.
 */
function verdictOf(verifier: Verifier, request: Request, onVerdict?: OnVerdict): Verdict | Promise<Verdict> {
  const bearer = readBearer(request.headers);
  const key = bearer.kind === 'absent' ? readKeyAndSecret(request.headers) : undefined;
  if (bearer.kind === 'absent' && key?.kind === 'absent') {
    onVerdict?.('none', 'NO_CREDENTIALS');
    throw new HttpError(401, NO_CREDENTIALS, {
      'www-authenticate': 'Bearer realm="keygate", Basic realm="keygate"',
    });
  }
  const scheme = bearer.kind === 'absent' ? 'key' : 'jwt';
  if (bearer.kind === 'malformed' || key?.kind === 'malformed') {
    onVerdict?.(scheme, 'MALFORMED');
    throw new HttpError(403, 'The credential headers are malformed.');
  }
  let verdict: Verdict | Promise<Verdict>;
  if (bearer.kind === 'bearer') verdict = verifier.verifyToken(bearer.token, 0, request);
  else if (key?.kind === 'key') verdict = verifier.verifyKey(key.key, key.secret, 0);
  else throw new Error('unreachable: a credential is present');
  return verdict instanceof Promise
    ? verdict.then((settled) => againstMinLevel(settled, request, scheme, onVerdict))
    : againstMinLevel(verdict, request, scheme, onVerdict);
}

/** A valid verdict below the query's minLevel becomes INSUFFICIENT_LEVEL; then it is counted. */
function againstMinLevel(
  verdict: Verdict,
  request: Request,
  scheme: 'key' | 'jwt',
  onVerdict?: OnVerdict,
): Verdict {
  // A malformed query is a 400 before any verdict is given, so it is not counted.
  const final: Verdict =
    verdict.valid && verdict.principal.level < minLevelOf(request.url)
      ? { valid: false, code: 'INSUFFICIENT_LEVEL', principal: verdict.principal }
      : verdict;
  onVerdict?.(scheme, final.code);
  return final;
}

/** `minLevel` once, one digit 0..8, and no other query parameter; absent: 0. */
export function minLevelOf(url: string): number {
  const queryStart = url.indexOf('?');
  if (queryStart === -1) return 0;
  const params = new URLSearchParams(url.slice(queryStart + 1));
  const names = [...params.keys()];
  if (names.length === 0) return 0;
  const value = params.get('minLevel');
  if (names.length !== 1 || value === null || !/^[0-8]$/.test(value)) {
    throw new HttpError(400, 'The only query parameter is minLevel, an integer from 0 to 8.');
  }
  return Number(value);
}

function refusal(verdict: Verdict): string {
  switch (verdict.code) {
    case 'INSUFFICIENT_LEVEL':
      return `This credential is level ${verdict.principal.level}, below the level required here.`;
    case 'INVALID_TOKEN':
      return 'The token is not valid.';
    case 'EXPIRED':
      return 'The API key has expired.';
    case 'NOT_FOUND':
      return 'The API key or secret is not valid.';
    default:
      return 'The credential is not valid.';
  }
}

/** The allow answer's headers, in this order (no object spread on the hot path). */
function allowHeaders(principal: Principal): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'cache-control': 'no-store',
    'x-keygate-user-id': String(principal.userId),
    'x-keygate-level': String(principal.level),
    'x-keygate-auth': principal.type,
  };
  if (principal.type === 'key') headers['x-keygate-key'] = principal.key;
  headers['x-keygate-expires-at'] = principal.expiresAt;
  return headers;
}
