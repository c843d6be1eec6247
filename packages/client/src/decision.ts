// The decision table shared by every middleware: what keygate said (a verify answer, or that it could
// not be asked) becomes a status, headers and keygate's error body. The framework files only read the
// request and write what this decides.
import type { components } from './openapi';

export type VerifyAnswer = components['schemas']['VerifyResponse'];
export type Principal = NonNullable<VerifyAnswer['principal']>;

/** The newer parts of the answer (ratelimit.duration, USAGE_EXCEEDED's retryAfter), read when a keygate that has them sends them. */
type RateLimitState = NonNullable<VerifyAnswer['ratelimit']> & { duration?: number };
type Answer = Omit<VerifyAnswer, 'code' | 'ratelimit'> & {
  code: string;
  ratelimit?: RateLimitState;
  retryAfter?: number;
};

/** What the guard learnt: keygate's answer, no usable credential, or no answer from keygate. */
export type Outcome =
  | { kind: 'answer'; answer: Answer }
  | { kind: 'missing' }
  | { kind: 'malformed' }
  | { kind: 'unavailable'; retryAfter?: number }
  | { kind: 'refused'; error: string };

export type Decision =
  | { pass: true; principal: Principal | null; headers: Record<string, string> }
  | { pass: false; status: number; headers: Record<string, string>; body: string };

/** Seconds a 503 asks the client to wait when keygate itself named no Retry-After. */
export const UNAVAILABLE_RETRY_AFTER = 5;

const CHALLENGE = 'Bearer realm="keygate", Basic realm="keygate"';

/** The table: each verify code, its status and the sentence the client reads. Any other code: 403. */
export const REFUSALS: Record<string, { status: 401 | 403 | 429; error: string }> = {
  NOT_FOUND: { status: 401, error: 'The API key or secret is not valid.' },
  EXPIRED: { status: 401, error: 'The API key has expired.' },
  INVALID_TOKEN: { status: 401, error: 'The token is not valid.' },
  DISABLED: { status: 403, error: 'The API key is disabled.' },
  IP_NOT_ALLOWED: { status: 403, error: 'The API key may not be used from this address.' },
  INSUFFICIENT_LEVEL: { status: 403, error: 'The credential’s level is too low for this route.' },
  INSUFFICIENT_PERMISSIONS: {
    status: 403,
    error: 'The credential lacks a permission this route needs.',
  },
  RATE_LIMITED: {
    status: 429,
    error: 'The API key’s rate limit is used up: retry after Retry-After seconds.',
  },
  USAGE_EXCEEDED: { status: 429, error: 'The API key’s credits are used up.' },
};
const UNKNOWN_CODE = { status: 403, error: 'The credential was refused.' } as const;

/**
 * The decision for `outcome`. `now` (ms) turns the rate limit's `reset` into seconds; `failOpen` lets
 * a request through, with no principal, when keygate could not answer (and only then).
 */
export function decide(outcome: Outcome, failOpen = false, now = Date.now()): Decision {
  switch (outcome.kind) {
    case 'missing':
      return deny(401, 'An API key and secret, or a token, is required.', { 'www-authenticate': CHALLENGE });
    case 'malformed':
      return deny(401, 'The credential is malformed.', { 'www-authenticate': CHALLENGE });
    case 'unavailable':
      if (failOpen) return { pass: true, principal: null, headers: {} };
      return deny(503, 'The API key service cannot be reached: retry after Retry-After seconds.', {
        'retry-after': String(outcome.retryAfter ?? UNAVAILABLE_RETRY_AFTER),
      });
    case 'refused':
      // keygate refused the verify request itself: a setting of this middleware is wrong (a malformed
      // permissions query, a minLevel out of range), not the client's credential.
      return deny(500, `The API key service refused the check: ${outcome.error}`, {});
    case 'answer':
      return decideAnswer(outcome.answer, now);
  }
}

function decideAnswer(answer: Answer, now: number): Decision {
  const headers: Record<string, string> = {};
  if (answer.ratelimit && answer.code !== 'USAGE_EXCEEDED') rateLimitHeaders(answer.ratelimit, now, headers);
  if (answer.code === 'VALID' && answer.valid && answer.principal) {
    return { pass: true, principal: answer.principal, headers };
  }
  const refusal = REFUSALS[answer.code] ?? UNKNOWN_CODE;
  if (refusal.status === 401) headers['www-authenticate'] = CHALLENGE;
  if (answer.code === 'RATE_LIMITED') headers['retry-after'] = String(answer.retryAfter ?? 1);
  if (answer.code === 'USAGE_EXCEEDED') {
    // Credits are a pool, not a window: verify names neither its size nor its refill interval, so
    // the refusal says what it knows (no RateLimit-Policy): the credits left and, when a refill will
    // come, when; the key's rate limit, if any, is not what refused it and is left out.
    if (answer.retryAfter !== undefined) headers['retry-after'] = String(answer.retryAfter);
    const remaining = answer.credits?.remaining ?? 0;
    headers.ratelimit = `"credits";r=${remaining}${answer.retryAfter !== undefined ? `;t=${answer.retryAfter}` : ''}`;
  }
  return deny(refusal.status, refusal.error, headers);
}

/** IETF HTTPAPI rate-limit fields, as keygate's forward-auth writes them (`w` once verify names it). */
function rateLimitHeaders(limit: RateLimitState, now: number, headers: Record<string, string>): void {
  const untilReset = Math.max(0, Math.ceil((Date.parse(limit.reset) - now) / 1000));
  headers['ratelimit-policy'] =
    `"default";q=${limit.limit}${limit.duration !== undefined ? `;w=${limit.duration}` : ''}`;
  headers.ratelimit = `"default";r=${limit.remaining};t=${untilReset}`;
}

function deny(status: number, error: string, headers: Record<string, string>): Decision {
  headers['content-type'] = 'application/json';
  headers['cache-control'] = 'no-store';
  return { pass: false, status, headers, body: JSON.stringify({ result: 'error', error }) };
}
