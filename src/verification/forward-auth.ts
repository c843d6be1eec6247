// Forward-auth for reverse proxies (nginx auth_request, Traefik forwardAuth, Caddy forward_auth, Envoy
// ext_authz): `/forward-auth` and `/forward-auth/<anything>`, any method, the body never read. The
// credential is the request's own headers, as for the /jwt and /key endpoints.
import { Elysia } from 'elysia';
import { ErrorResponse } from '../apikeys/model';
import { readBearer, readKeyAndSecret } from '../auth/credentials';
import { tokenRefusalSentence } from '../auth/token-users';
import { LEVEL_RULE } from '../core/levels';
import { andThen, type SyncOrAsync } from '../core/sync-or-async';
import { queryOf } from '../http/edge';
import { HttpError } from '../http/errors';
import { contextOf, type RequestContext } from '../http/request-context';
import { verificationModels } from './model';
import type { RateLimitReport } from './usage-limits';
import type { OnVerdict, Verdict, Verifier } from './verdict';

/** The first path segment; the edge lets bodies of any declared size through here (they are never read). */
export const FORWARD_AUTH_PATH = '/forward-auth';

const NO_CREDENTIALS =
  'Send a credential: Authorization: Bearer <token>, Authorization: Basic base64(key:secret), or X-API-Key and X-API-Secret.';

/** The forward-auth answer (the edge's DirectRoute): 200 with the identity headers, or an HttpError. */
export function forwardAuthAnswer(verifier: Verifier, onVerdict?: OnVerdict) {
  return (
    request: Request,
    query: string,
    headers: Record<string, string>,
    context: RequestContext,
  ): SyncOrAsync<Response> =>
    andThen(verdictOf(verifier, request, query, context, onVerdict), (verdict) => allowed(verdict, headers));
}

/** The routes as Elysia knows them, for the document (the edge answers these paths itself). */
export function forwardAuthRoutes(answer: ReturnType<typeof forwardAuthAnswer>) {
  const handler = ({ request }: { request: Request }) =>
    answer(request, queryOf(request.url), {}, contextOf(request));
  const options = {
    // The body is never read, whatever the method and its Content-Type.
    parse: 'none' as const,
    response: {
      200: 'ForwardAuthResponse' as const,
      400: ErrorResponse,
      401: ErrorResponse,
      403: ErrorResponse,
      429: ErrorResponse,
    },
    detail: {
      summary: 'Forward-auth for a reverse proxy (any method)',
      description:
        'Allows (200, identity in X-Keygate-* headers; a rate-limited key adds RateLimit-Policy and RateLimit) or denies (401 without a credential, 403 for an invalid one or a level below the one required, 429 with Retry-After for a rate limit or credits used up; every deny names its code in X-Keygate-Code). The required level is the highest of every minLevel=0..8 in the query and of the X-Keygate-Min-Level header; other query parameters (the client’s own, forwarded by a proxy) are ignored.',
      security: [{ bearer: [] }, { basic: [] }, { apiKey: [], apiSecret: [] }] as Record<string, string[]>[],
      tags: ['Verification'],
    },
  };
  return (
    new Elysia()
      .use(verificationModels)
      .all(FORWARD_AUTH_PATH, handler, options)
      // "/forward-auth/*" is not an OpenAPI path template.
      .all(`${FORWARD_AUTH_PATH}/*`, handler, { ...options, detail: { ...options.detail, hide: true } })
  );
}

/**
 * Credentials first (401, 403), then the query (400), then the level (403). At once for a key in the
 * key cache or read from a synchronous store (no promise), else a promise.
 */
function verdictOf(
  verifier: Verifier,
  request: Request,
  query: string,
  context: RequestContext,
  onVerdict?: OnVerdict,
): SyncOrAsync<Verdict> {
  const bearer = readBearer(request.headers);
  const key = bearer.kind === 'absent' ? readKeyAndSecret(request.headers) : undefined;
  if (bearer.kind === 'absent' && key?.kind === 'absent') {
    onVerdict?.('none', 'NO_CREDENTIALS');
    throw new HttpError(401, NO_CREDENTIALS, {
      'www-authenticate': 'Bearer realm="keygate", Basic realm="keygate"',
      'x-keygate-code': 'MISSING_CREDENTIAL',
    });
  }
  const scheme = bearer.kind === 'absent' ? 'key' : 'jwt';
  if (bearer.kind === 'malformed' || key?.kind === 'malformed') {
    onVerdict?.(scheme, 'MALFORMED');
    throw new HttpError(403, 'The credential headers are malformed.', {
      'x-keygate-code': scheme === 'jwt' ? 'INVALID_TOKEN' : 'NOT_FOUND',
    });
  }
  const judge = (settled: Verdict) =>
    againstMinLevel(settled, query, request.headers.get('x-keygate-min-level'));
  const counted = (final: Verdict) => {
    onVerdict?.(scheme, final.code);
    return final;
  };
  // A key's level is judged inside the verifier, before its rate limits and credits (one credit each).
  if (key?.kind === 'key') return andThen(verifier.verifyKey(key.key, key.secret, { judge }), counted);
  if (bearer.kind !== 'bearer') throw new Error('unreachable: a credential is present');
  return andThen(verifier.verifyToken(bearer.token, 0), (settled) => {
    if (settled.code === 'INVALID_TOKEN') context.tokenRefusal = settled.reason;
    return counted(judge(settled));
  });
}

/**
 * A valid verdict below the required level becomes INSUFFICIENT_LEVEL. A malformed query is a 400
 * thrown here, before any verdict is given, so it is not counted.
 */
function againstMinLevel(verdict: Verdict, query: string, minLevelHeader: string | null): Verdict {
  return verdict.valid && verdict.principal.level < requiredLevel(query, minLevelHeader)
    ? { valid: false, code: 'INSUFFICIENT_LEVEL', principal: verdict.principal }
    : verdict;
}

/**
 * The level required here: the highest of every `minLevel` in the query and of the
 * X-Keygate-Min-Level header (a client may raise the bar, never lower it); 0 without any. Other query
 * parameters are the client's own, forwarded by the proxy (Envoy, Traefik), and ignored. A value that
 * is not one digit 0..8 is a 400.
 */
export function requiredLevel(query: string, header: string | null): number {
  let required = header === null ? 0 : levelOf(header);
  if (query !== '') {
    for (const [name, value] of new URLSearchParams(query)) {
      if (name === 'minLevel') required = Math.max(required, levelOf(value));
    }
  }
  return required;
}

function levelOf(value: string): number {
  if (!/^[0-8]$/.test(value)) {
    throw new HttpError(400, `minLevel (query or X-Keygate-Min-Level) must be ${LEVEL_RULE}, one digit.`);
  }
  return value.charCodeAt(0) - 48;
}

function refusal(verdict: Verdict): string {
  switch (verdict.code) {
    case 'INSUFFICIENT_LEVEL':
      return `This credential is level ${verdict.principal.level}, below the level required here.`;
    case 'INVALID_TOKEN':
      return tokenRefusalSentence(verdict.reason);
    case 'EXPIRED':
      return 'The API key has expired.';
    case 'DISABLED':
      return 'The API key is disabled.';
    case 'NOT_FOUND':
      return 'The API key or secret is not valid.';
    case 'RATE_LIMITED':
      return `The API key's rate limit is used up: retry in ${verdict.retryAfter} seconds.`;
    case 'USAGE_EXCEEDED':
      return "The API key's credits are used up.";
    default:
      return 'The credential is not valid.';
  }
}

function denial(verdict: Verdict & { valid: false }): HttpError {
  const headers: Record<string, string> = { 'x-keygate-code': verdict.code };
  if (verdict.code === 'RATE_LIMITED') {
    headers['retry-after'] = String(verdict.retryAfter);
    rateLimitHeaders(verdict.ratelimit, headers);
    return new HttpError(429, refusal(verdict), headers);
  }
  if (verdict.code === 'USAGE_EXCEEDED') {
    if (verdict.retryAfter !== undefined) headers['retry-after'] = String(verdict.retryAfter);
    return new HttpError(429, refusal(verdict), headers);
  }
  return new HttpError(403, refusal(verdict), headers);
}

/**
 * The rate-limit header fields a proxy may pass on: the policy (quota `q` per window `w` seconds) and
 * the state (`r` remaining, `t` seconds until the whole limit is back).
 */
function rateLimitHeaders(limit: RateLimitReport, headers: Record<string, string>): void {
  const untilReset = Math.max(0, Math.ceil((limit.reset - limit.now) / 1000));
  headers['ratelimit-policy'] = `"default";q=${limit.limit};w=${limit.duration}`;
  headers.ratelimit = `"default";r=${limit.remaining};t=${untilReset}`;
}

/**
 * A subject as a header value: unchanged when it is visible ASCII without '%' (the shape of every
 * provider's subjects), else with each other character percent-encoded as UTF-8, which
 * decodeURIComponent reverses; a header cannot carry control characters or text beyond Latin-1.
 */
export function subjectHeaderValue(subject: string): string {
  return HEADER_SAFE.test(subject) ? subject : subject.replace(NOT_HEADER_SAFE, encodeURIComponent);
}
const HEADER_SAFE = /^[\x21-\x24\x26-\x7e]*$/;
const NOT_HEADER_SAFE = /[^\x21-\x24\x26-\x7e]/gu;

/**
 * The allow answer, its headers added to the edge's in this order; a refusal is a 403, or a 429 for
 * a rate limit or credits used up (with Retry-After when waiting helps).
 */
function allowed(verdict: Verdict, headers: Record<string, string>): Response {
  // Every deny names its verification code, for a proxy to act on (nginx: auth_request_set).
  if (!verdict.valid) throw denial(verdict);
  const { principal } = verdict;
  if (verdict.ratelimit !== undefined) rateLimitHeaders(verdict.ratelimit, headers);
  headers['content-type'] = 'application/json';
  headers['cache-control'] = 'no-store';
  headers['x-keygate-user-id'] = String(principal.userId);
  if (principal.subject !== undefined) headers['x-keygate-subject'] = subjectHeaderValue(principal.subject);
  headers['x-keygate-level'] = String(principal.level);
  headers['x-keygate-auth'] = principal.type;
  if (principal.type === 'key') headers['x-keygate-key'] = principal.key;
  headers['x-keygate-expires-at'] = principal.expiresAt;
  return new Response(JSON.stringify({ result: 'success', principal }), { headers });
}
