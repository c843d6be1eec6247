// POST /apikeys/verify: no caller authentication; the body carries the credential to check, and a
// well-formed body always gets 200 with a code (it tells the holder only what using it would).
import { Elysia } from 'elysia';
import { ErrorResponse } from '../apikeys/model';
import { isoFormatter } from '../core/clock';
import { isLevel, LEVEL_RULE } from '../core/levels';
import { readJsonBody } from '../http/body';
import { HttpError } from '../http/errors';
import { contextOf, type RequestContext } from '../http/request-context';
import { CREDITS_BOUNDS } from '../limits/credits';
import { type Address, parseAddress } from '../network/address';
import { type PermissionQuery, PermissionQueryError, parsePermissionQuery } from '../permissions/query';
import { VerifyBody, verificationModels } from './model';
import { type OnVerdict, principalJson, type Verdict, type Verifier, validBody } from './verdict';

type Requirements = { minLevel: number; permissions: readonly PermissionQuery[] | undefined };
type Credential =
  | (Requirements & { key: string; secret: string; cost: number; clientAddress: () => Address | undefined })
  | (Requirements & { token: string });

export const VERIFY_PATH = '/apikeys/verify';

/**
 * The verify answer (the edge's DirectRoute): 200 with the verdict, or an HttpError for the body (no
 * caller to authenticate first: a bad body is refused at once).
 */
export function verifyAnswer(verifier: Verifier, onVerdict?: OnVerdict) {
  return (
    request: Request,
    _query: string,
    headers: Record<string, string>,
    context: RequestContext,
  ): Promise<Response> =>
    readJsonBody(request).then((body) => {
      const credential = credentialOf(body);
      const scheme = 'token' in credential ? 'jwt' : 'key';
      const verdict =
        'token' in credential
          ? verifier.verifyToken(credential.token, credential)
          : verifier.verifyKey(credential.key, credential.secret, credential);
      // A key in the key cache is judged at once: no more waiting, and no closure, on the hot path.
      return verdict instanceof Promise
        ? verdict.then((settled) => verified(settled, scheme, headers, context, onVerdict))
        : verified(verdict, scheme, headers, context, onVerdict);
    });
}

function verified(
  verdict: Verdict,
  scheme: 'jwt' | 'key',
  headers: Record<string, string>,
  context: RequestContext,
  onVerdict?: OnVerdict,
): Response {
  onVerdict?.(scheme, verdict.code);
  if (verdict.code === 'INVALID_TOKEN') context.tokenRefusal = verdict.reason;
  headers['content-type'] = 'application/json';
  headers['cache-control'] = 'no-store';
  return new Response(answerText(verdict), { headers });
}

/**
 * The answer's JSON, written field by field in the order the interface shows (the same bytes
 * JSON.stringify gives an object of them, absent parts left out): around the principal's kept text
 * (`principalJson`), and a VALID answer without limits kept whole (`validBody`).
 */
function answerText(verdict: Verdict): string {
  if (!('principal' in verdict)) return `${answerStart(verdict)}}`;
  const limits = limitsText(verdict);
  // Most answers: nothing to write, the kept text is sent.
  if (limits === '' && verdict.code === 'VALID') return validBody(verdict.principal);
  return `${answerStart(verdict)},"principal":${principalJson(verdict.principal)}${limits}}`;
}

const answerStart = (verdict: Verdict) =>
  `{"result":"success","valid":${verdict.valid},"code":"${verdict.code}"`;

/** Answers in a row mostly share a reset (the latest admission's millisecond + the duration). */
const isoResetOf = isoFormatter();

/** What follows the principal: `ratelimit`, `credits`, then `retryAfter` (whole numbers, known scopes), each when present. */
function limitsText(verdict: Verdict): string {
  let text = '';
  const limit = 'ratelimit' in verdict ? verdict.ratelimit : undefined;
  if (limit !== undefined) {
    const reset = isoResetOf(limit.reset);
    text += `,"ratelimit":{"limit":${limit.limit},"duration":${limit.duration},"remaining":${limit.remaining},"reset":"${reset}","scope":"${limit.scope}"}`;
  }
  const credits = 'credits' in verdict ? verdict.credits : undefined;
  if (credits !== undefined) {
    text += `,"credits":{"remaining":${credits.remaining},"scope":"${credits.scope}"}`;
  }
  // RATE_LIMITED always; USAGE_EXCEEDED when a refill will come.
  const retryAfter = 'retryAfter' in verdict ? verdict.retryAfter : undefined;
  if (retryAfter !== undefined) text += `,"retryAfter":${retryAfter}`;
  return text;
}

/** The route as Elysia knows it, for the document: the body's schema and the answers' are named there. */
export function verifyRoutes(answer: ReturnType<typeof verifyAnswer>) {
  const handler = ({ request }: { request: Request }) => answer(request, '', {}, contextOf(request));
  return new Elysia().use(verificationModels).post(VERIFY_PATH, handler, {
    // The handler reads and checks the body itself, so Elysia runs no parser, transform or schema
    // check on it (+12% verifies a second; bench/HISTORY.md).
    parse: 'none',
    response: { 200: 'VerifyResponse', 400: ErrorResponse, 413: ErrorResponse },
    detail: {
      summary: 'Verify a key and secret, or a token',
      description:
        'No caller authentication. Always 200 for a well-formed body: valid true with code VALID, or valid false with NOT_FOUND, EXPIRED, DISABLED, INVALID_TOKEN, IP_NOT_ALLOWED, INSUFFICIENT_LEVEL, INSUFFICIENT_PERMISSIONS, RATE_LIMITED or USAGE_EXCEEDED.',
      tags: ['Verification'],
      requestBody: {
        description: VerifyBody.description,
        content: { 'application/json': { schema: { $ref: '#/components/schemas/VerifyBody' } } },
        required: true,
      },
    },
  });
}

const CREDENTIAL_FIELDS = ['key', 'secret', 'token'] as const;
const FORMS =
  'send either key and secret, or token, each with an optional minLevel, permissions, cost and clientIp';
const NO_ADDRESS = () => undefined;

/** The credential in a verify body, or a 400 naming the first problem. */
export function credentialOf(body: unknown): Credential {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new HttpError(400, `The body must be a JSON object: ${FORMS}.`);
  }
  const fields = body as Record<string, unknown>;
  for (const name in fields) {
    if (
      name !== 'key' &&
      name !== 'secret' &&
      name !== 'token' &&
      name !== 'minLevel' &&
      name !== 'cost' &&
      name !== 'permissions' &&
      name !== 'clientIp'
    ) {
      throw new HttpError(400, `Unknown property "${name.slice(0, 40)}": ${FORMS}.`);
    }
  }
  for (const name of CREDENTIAL_FIELDS) {
    if (name in fields && typeof fields[name] !== 'string')
      throw new HttpError(400, `${name} must be a string.`);
  }
  if ('minLevel' in fields && !isLevel(fields.minLevel)) {
    throw new HttpError(400, `minLevel must be ${LEVEL_RULE}.`);
  }
  const minLevel = (fields.minLevel as number | undefined) ?? 0;
  const { cost: bounds } = CREDITS_BOUNDS;
  if ('cost' in fields && !isWholeNumberIn(fields.cost, bounds.min, bounds.max)) {
    throw new HttpError(400, `cost must be a whole number from ${bounds.min} to ${bounds.max}.`);
  }
  const cost = (fields.cost as number | undefined) ?? bounds.default;
  const permissions = 'permissions' in fields ? [permissionQueryOf(fields.permissions)] : undefined;
  const clientAddress = 'clientIp' in fields ? addressGetterOf(fields.clientIp) : NO_ADDRESS;
  const hasKey = 'key' in fields || 'secret' in fields;
  const hasToken = 'token' in fields;
  if (hasKey && hasToken) throw new HttpError(400, `Both forms were sent: ${FORMS}.`);
  if (hasToken) return { token: fields.token as string, minLevel, permissions };
  if (!('key' in fields) || !('secret' in fields)) {
    throw new HttpError(400, hasKey ? 'key and secret go together: send both.' : `No credential: ${FORMS}.`);
  }
  return {
    key: fields.key as string,
    secret: fields.secret as string,
    minLevel,
    permissions,
    cost,
    clientAddress,
  };
}

/** The permissions query, parsed once per distinct text (the parser keeps them), or a 400 saying where it is wrong. */
function permissionQueryOf(value: unknown): PermissionQuery {
  if (typeof value !== 'string') {
    throw new HttpError(
      400,
      'permissions must be a string: a query such as "documents.read AND billing.read".',
    );
  }
  try {
    return parsePermissionQuery(value);
  } catch (error) {
    if (error instanceof PermissionQueryError) throw new HttpError(400, error.message);
    throw error;
  }
}

/** The client's address from the body, or a 400; a getter, as forward-auth's (asked only of keys with allowedIps). */
function addressGetterOf(value: unknown): () => Address | undefined {
  const address = typeof value === 'string' ? parseAddress(value) : undefined;
  if (address === undefined) throw new HttpError(400, 'clientIp must be an IPv4 or IPv6 address.');
  return () => address;
}

function isWholeNumberIn(value: unknown, min: number, max: number): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max;
}
