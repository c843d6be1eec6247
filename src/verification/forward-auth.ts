// Forward-auth for reverse proxies (nginx auth_request, Traefik forwardAuth, Caddy forward_auth, Envoy
// ext_authz): `/forward-auth` and `/forward-auth/<anything>`, any method, the body never read. The
// credential is the request's own headers, as for the /jwt and /key endpoints. What it must have is
// the highest level and the AND of the permissions asked by the query, by the proxy's headers and by
// the route rule that matches the proxied request (route-rules.ts); the requirements are read first,
// so a malformed one is a 400 whatever the credential.
import { Elysia } from 'elysia';
import { ErrorResponse } from '../apikeys/model';
import { readBearer, readKeyAndSecret } from '../auth/credentials';
import { tokenRefusalSentence } from '../auth/token-users';
import type { ForwardAuthRule } from '../config';
import { LEVEL_RULE } from '../core/levels';
import { andThen, type SyncOrAsync } from '../core/sync-or-async';
import { queryOf } from '../http/edge';
import { HttpError } from '../http/errors';
import { contextOf, type RequestContext } from '../http/request-context';
import type { Address } from '../network/address';
import { type PermissionQuery, PermissionQueryError, parsePermissionQuery } from '../permissions/query';
import { verificationModels } from './model';
import { forwardedRequestOf, matchingRule, normalisedPath, PathRefusedError } from './route-rules';
import type { RateLimitReport } from './usage-limits';
import {
  allowedBody,
  type KeyCheck,
  type OnVerdict,
  type Requirements,
  type Verdict,
  type Verifier,
} from './verdict';

/** The first path segment; the edge lets bodies of any declared size through here (they are never read). */
export const FORWARD_AUTH_PATH = '/forward-auth';

const NO_CREDENTIALS =
  'Send a credential: Authorization: Bearer <token>, Authorization: Basic base64(key:secret), or X-API-Key and X-API-Secret.';

export type ForwardAuthOptions = {
  /** The route rules in force (FORWARD_AUTH_RULES_FILE, read again on SIGHUP); none: no rule matches. */
  rules: () => readonly ForwardAuthRule[];
  /** What a request no rule matches gets: any valid credential, or 403 NO_RULE. */
  unmatched: 'credential' | 'deny';
  /** The client's address (the TCP peer, or behind TRUSTED_PROXIES the forwarded one). */
  clientAddress: (request: Request, context: RequestContext) => Address | undefined;
  /** BASE_PATH + /forward-auth: what comes after it is the proxied path (Envoy). */
  pathPrefix: string;
};

/**
 * What a request must show beside the query's and the header's minLevel: the rule's level and the
 * permissions asked, or nothing at all (a rule allowing anyone).
 */
type Demand = { ruleLevel: number; permissions: readonly PermissionQuery[] | undefined } | 'anyone';

/** The forward-auth answer (the edge's DirectRoute): 200 with the identity headers, or an HttpError. */
export function forwardAuthAnswer(verifier: Verifier, options: ForwardAuthOptions, onVerdict?: OnVerdict) {
  return (
    request: Request,
    query: string,
    headers: Record<string, string>,
    context: RequestContext,
  ): SyncOrAsync<Response> => {
    const demand = demandOf(request, query, options, onVerdict);
    if (demand === 'anyone') return allowedWithoutCredential(headers);
    const verdict = verdictOf(verifier, request, query, demand, context, options, onVerdict);
    // No closure on the hot path (a key in the key cache): written out, not through andThen.
    return verdict instanceof Promise
      ? verdict.then((settled) => allowed(settled, headers))
      : allowed(verdict, headers);
  };
}

/** The routes as Elysia knows them, for the document (the edge answers these paths itself). */
export function forwardAuthRoutes(answer: ReturnType<typeof forwardAuthAnswer>) {
  const handler = ({ request }: { request: Request }) =>
    answer(request, queryOf(request.url), {}, contextOf(request));
  // The document's words for what the route asks of the proxy and the client.
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
        'Allows (200, identity in X-Keygate-* headers, the credential’s permissions in X-Keygate-Permissions; a rate-limited key adds RateLimit-Policy and RateLimit) or denies (401 without a credential, 403 for an invalid one, a level or permissions below those required, an address outside the key’s allowedIps or no matching route rule with FORWARD_AUTH_DEFAULT=deny, 429 with Retry-After for a rate limit or credits used up; every deny names its code in X-Keygate-Code). The required level is the highest of every minLevel=0..8 in the query, of the X-Keygate-Min-Level header and of the matching route rule; the required permissions are the AND of every permissions query parameter, of the X-Keygate-Permissions header and of the rule. The proxied method and path come from X-Forwarded-Method and X-Forwarded-Uri, X-Original-Method and X-Original-URI, or the path after /forward-auth. Other query parameters (the client’s own, forwarded by a proxy) are ignored.',
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
 * The requirements, before any credential is looked at (each malformed one a 400): the permissions of
 * the query and the proxy's header, then the route rule that matches the proxied request, which may
 * allow anyone, add its own, or (none matching, FORWARD_AUTH_DEFAULT=deny) refuse. The query's and
 * header's minLevel are read after the credential, as before rules existed (verdictOf).
 */
function demandOf(
  request: Request,
  query: string,
  options: ForwardAuthOptions,
  onVerdict?: OnVerdict,
): Demand {
  const { headers } = request;
  let ruleLevel = 0;
  let permissions = requiredPermissions(query, headers.get('x-keygate-permissions'));
  const rules = options.rules();
  // Without rules or asked permissions (the common case) nothing more is read or made.
  if (permissions === undefined && rules.length === 0 && options.unmatched === 'credential') return NO_DEMAND;
  if (rules.length > 0 || options.unmatched === 'deny') {
    const rule = ruleFor(request, rules, options.pathPrefix);
    if (rule === undefined) {
      if (options.unmatched === 'deny') {
        onVerdict?.('none', 'NO_RULE');
        throw new HttpError(403, 'No route rule allows this request.', { 'x-keygate-code': 'NO_RULE' });
      }
    } else {
      if (rule.allow === 'anyone') return 'anyone';
      if (rule.minLevel !== undefined) ruleLevel = rule.minLevel;
      if (rule.permissions !== undefined) permissions = [...(permissions ?? []), rule.permissions];
    }
  }
  return ruleLevel === 0 && permissions === undefined ? NO_DEMAND : { ruleLevel, permissions };
}

/** Most requests: no rule's level and no permissions asked (one object for all of them). */
const NO_DEMAND: Demand = Object.freeze({ ruleLevel: 0, permissions: undefined });

/** The first rule matching the proxied request's method and normalised path; none without them. */
function ruleFor(
  request: Request,
  rules: readonly ForwardAuthRule[],
  pathPrefix: string,
): ForwardAuthRule | undefined {
  try {
    const forwarded = forwardedRequestOf(request.headers, request.method, suffixOf(request.url, pathPrefix));
    if (forwarded === undefined) return undefined;
    return matchingRule(rules, forwarded.method, normalisedPath(forwarded.target));
  } catch (error) {
    // A path that climbs above the root, or headers that disagree on which request it is.
    if (error instanceof PathRefusedError) throw new HttpError(400, error.message);
    throw error;
  }
}

/** What follows /forward-auth in the request's URL (path and query), or undefined when nothing does. */
function suffixOf(url: string, pathPrefix: string): string | undefined {
  const pathStart = url.indexOf('/', url.indexOf('//') + 2);
  const rest = url.slice(pathStart + pathPrefix.length);
  return rest.startsWith('/') ? rest : undefined;
}

/**
 * Credentials (401, 403), then the level asked (400 when malformed), then the credential's verdict
 * against the requirements. At once for a key in the key cache or read from a synchronous store (no
 * promise), else a promise.
 */
function verdictOf(
  verifier: Verifier,
  request: Request,
  query: string,
  demand: Exclude<Demand, 'anyone'>,
  context: RequestContext,
  options: ForwardAuthOptions,
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
  const minLevel = Math.max(
    demand.ruleLevel,
    requiredLevel(query, request.headers.get('x-keygate-min-level')),
  );
  if (key?.kind === 'key') {
    // One credit each; the address is asked only of a key that has allowedIps.
    const check = new ForwardAuthKeyCheck(minLevel, demand.permissions, request, context, options);
    const verdict = verifier.verifyKey(key.key, key.secret, check);
    if (onVerdict === undefined) return verdict;
    // A key in the key cache is judged at once: told without a closure for it.
    if (!(verdict instanceof Promise)) return counted(verdict, 'key', onVerdict);
    return verdict.then((final) => counted(final, 'key', onVerdict));
  }
  if (bearer.kind !== 'bearer') throw new Error('unreachable: a credential is present');
  const required: Requirements = { minLevel, permissions: demand.permissions };
  return andThen(verifier.verifyToken(bearer.token, required), (settled) => {
    if (settled.code === 'INVALID_TOKEN') context.tokenRefusal = settled.reason;
    return onVerdict === undefined ? settled : counted(settled, 'jwt', onVerdict);
  });
}

function counted(final: Verdict, scheme: 'key' | 'jwt', onVerdict: OnVerdict): Verdict {
  onVerdict(scheme, final.code);
  return final;
}

/**
 * A key's check here, one object per request: the client's address (the TCP peer, or behind
 * TRUSTED_PROXIES the forwarded one) is worked out only when the key has allowedIps and asks for it.
 */
class ForwardAuthKeyCheck implements KeyCheck {
  constructor(
    readonly minLevel: number,
    readonly permissions: readonly PermissionQuery[] | undefined,
    private readonly request: Request,
    private readonly context: RequestContext,
    private readonly options: ForwardAuthOptions,
  ) {}

  clientAddress(): Address | undefined {
    return this.options.clientAddress(this.request, this.context);
  }
}

/**
 * The permissions required by the query (every `permissions` parameter) and the proxy's
 * X-Keygate-Permissions header (empty: no requirement), each a query as verify's; all must hold.
 * Undefined when none is asked.
 */
function requiredPermissions(query: string, header: string | null): PermissionQuery[] | undefined {
  let required: PermissionQuery[] | undefined;
  if (header !== null && header.trim() !== '') required = [permissionsOf(header, 'X-Keygate-Permissions')];
  if (query !== '' && query.includes('permissions=')) {
    for (const [name, value] of new URLSearchParams(query)) {
      if (name === 'permissions') {
        required ??= [];
        required.push(permissionsOf(value, 'The permissions query parameter'));
      }
    }
  }
  return required;
}

function permissionsOf(text: string, where: string): PermissionQuery {
  try {
    return parsePermissionQuery(text);
  } catch (error) {
    if (error instanceof PermissionQueryError) throw new HttpError(400, `${where}: ${error.message}`);
    throw error;
  }
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
    case 'INSUFFICIENT_PERMISSIONS':
      return 'This credential lacks the permissions required here.';
    case 'IP_NOT_ALLOWED':
      return 'This API key may not be used from this address.';
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
  // What the credential holds, for the upstream to decide finer (names are not secret).
  if (principal.permissions !== undefined) headers['x-keygate-permissions'] = principal.permissions.join(' ');
  return new Response(allowedBody(principal), { headers });
}

/** A route rule that allows anyone: 200 without looking at any credential, no identity headers. */
function allowedWithoutCredential(headers: Record<string, string>): Response {
  headers['content-type'] = 'application/json';
  headers['cache-control'] = 'no-store';
  return new Response('{"result":"success"}', { headers });
}
