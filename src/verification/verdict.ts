// One credential in, one verdict out: the rules shared by POST /apikeys/verify and forward-auth.
// A key is authenticated by the apikeys service (the key cache, one hash, one compare), a token by
// the JwtAuthority and mapped to its user (auth/token-users.ts); the verdict is then judged against
// the level asked for, and a key that would be VALID is then held to its rate limits and credits
// (usage-limits.ts). With mapped user ids the principal also names the provider's subject.
import type { ApiKeyService, KeyAuthentication } from '../apikeys/service';
import { type KeyMeta, metaOf } from '../apikeys/settings';
import type { ApiKeyRow } from '../apikeys/store';
import type { TokenRefusal } from '../auth/jwt';
import type { TokenUser, TokenUsers } from '../auth/token-users';
import { andThen, type SyncOrAsync } from '../core/sync-or-async';
import { type UsageRecorder, usageOutcomeOf } from '../usage/counter';
import {
  applyUsageLimits,
  type CreditsReport,
  type LimitsOutcome,
  type RateLimitReport,
  type UsageLimits,
} from './usage-limits';

/** `subject`: with mapped user ids, the token's `sub`, or the subject of the key's owner. */
export type Principal =
  | {
      type: 'key';
      key: string;
      userId: number;
      level: number;
      name: string;
      expiresAt: string;
      meta?: KeyMeta;
      subject?: string;
    }
  | { type: 'jwt'; userId: number; level: number; expiresAt: string; subject?: string };

export type Verdict =
  | { valid: true; code: 'VALID'; principal: Principal; ratelimit?: RateLimitReport; credits?: CreditsReport }
  | { valid: false; code: 'INSUFFICIENT_LEVEL' | 'DISABLED'; principal: Principal }
  | {
      valid: false;
      code: 'RATE_LIMITED';
      principal: Principal;
      ratelimit: RateLimitReport;
      /** Whole seconds (at least 1) until a verification can pass. */
      retryAfter: number;
    }
  | {
      valid: false;
      code: 'USAGE_EXCEEDED';
      principal: Principal;
      credits: CreditsReport;
      /** Whole seconds until the next refill, when one will come. */
      retryAfter?: number;
    }
  | { valid: false; code: 'NOT_FOUND' | 'EXPIRED' }
  /** `reason` is for the request's log line only (LOG_LEVEL=debug), never for the answer. */
  | { valid: false; code: 'INVALID_TOKEN'; reason: TokenRefusal };

export type Verifier = ReturnType<typeof createVerifier>;

/**
 * How a key is checked: the level asked for, the credits a VALID answer takes (default 1), and
 * `judge`, which may turn the credential's verdict into another before the limits apply (forward-auth's
 * level, required once the credential is judged).
 */
export type KeyCheck = { minLevel?: number; cost?: number; judge?: (verdict: Verdict) => Verdict };

/**
 * Told the outcome of each verify or forward-auth check (metrics): the scheme of the credential
 * (`none` when there was none) and the verdict's code, or NO_CREDENTIALS / MALFORMED for the
 * forward-auth refusals that come before a verdict.
 */
export type OnVerdict = (scheme: 'key' | 'jwt' | 'none', code: string) => void;

export function createVerifier({
  tokens,
  service,
  ownerSubject,
  usage,
  limits,
}: {
  tokens: TokenUsers;
  service: Pick<ApiKeyService, 'authenticateKey'>;
  /** With mapped user ids: the subject a key's owner was given to (at once when remembered). */
  ownerSubject?: (userId: number) => SyncOrAsync<string | undefined>;
  /** Told each verdict on an existing key (a new code is counted by usageOutcomeOf, denied by default). */
  usage?: UsageRecorder;
  /** Rate limits and credits; without them no key is limited (tests of the other rules). */
  limits?: UsageLimits;
}) {
  // The steps of a key's verification, each a function of its own (no closure made per request): a
  // key in the key cache goes through all of them at once, without a promise.
  const keyVerdict = (outcome: KeyAuthentication, minLevel: number): SyncOrAsync<Verdict> => {
    if (outcome.status === 'not-found') return { valid: false, code: 'NOT_FOUND' };
    if (outcome.status === 'expired') return { valid: false, code: 'EXPIRED' };
    const principal = keyPrincipal(outcome.row);
    if (ownerSubject === undefined) return enabledOrNot(outcome.row, principal, minLevel);
    return andThen(ownerSubject(principal.userId), (subject) => {
      if (subject !== undefined) principal.subject = subject;
      return enabledOrNot(outcome.row, principal, minLevel);
    });
  };
  const checked = (
    key: string,
    outcome: KeyAuthentication,
    { minLevel = 0, cost = 1, judge }: KeyCheck,
  ): SyncOrAsync<Verdict> => {
    const first = keyVerdict(outcome, minLevel);
    return first instanceof Promise
      ? first.then((settled) => limited(key, outcome, judge === undefined ? settled : judge(settled), cost))
      : limited(key, outcome, judge === undefined ? first : judge(first), cost);
  };
  const limited = (key: string, outcome: KeyAuthentication, judged: Verdict, cost: number) => {
    if (!judged.valid || limits === undefined || outcome.status !== 'valid')
      return counted(key, outcome, judged);
    const applied = applyUsageLimits(limits, outcome.row, cost);
    return applied instanceof Promise
      ? applied.then((settled) => counted(key, outcome, limitedVerdict(judged, settled)))
      : counted(key, outcome, limitedVerdict(judged, applied));
  };
  const counted = (key: string, outcome: KeyAuthentication, final: Verdict): Verdict => {
    // Only ids that name a key are counted (a wrong secret carries its key's id); an unknown id costs
    // the counter what a wrong secret does, and counts nothing.
    if (usage !== undefined) {
      const keyId = outcome.status === 'not-found' ? outcome.keyId : outcome.row.id;
      if (keyId !== undefined) usage.record(keyId, usageOutcomeOf(final.code));
      else usage.recordUnknown(key);
    }
    return final;
  };
  return {
    /**
     * At once on a key cache hit or a synchronous store's read (no promise), else a promise. `judge`
     * may turn the verdict into the final one (forward-auth's level, required after the credential is
     * judged); the final verdict is the one the key's usage counts, and none when `judge` throws.
     */
    verifyKey(key: string, secret: string, check: KeyCheck = {}): SyncOrAsync<Verdict> {
      const outcome = service.authenticateKey(key, secret);
      return outcome instanceof Promise
        ? outcome.then((settled) => checked(key, settled, check))
        : checked(key, outcome, check);
    },

    async verifyToken(token: string, minLevel: number): Promise<Verdict> {
      const check = await tokens.verify(token);
      if (!check.ok) return { valid: false, code: 'INVALID_TOKEN', reason: check.reason };
      return judged(tokenPrincipal(check.user), minLevel);
    },
  };
}

/** A VALID verdict as its key's limits and credits leave it. */
function limitedVerdict(verdict: Verdict & { valid: true }, limited: LimitsOutcome): Verdict {
  const { principal } = verdict;
  if (limited.allowed) {
    if (limited.ratelimit === undefined && limited.credits === undefined) return verdict;
    const answer: Verdict = { valid: true, code: 'VALID', principal };
    if (limited.ratelimit !== undefined) answer.ratelimit = limited.ratelimit;
    if (limited.credits !== undefined) answer.credits = limited.credits;
    return answer;
  }
  if (limited.code === 'RATE_LIMITED') {
    const { ratelimit, retryAfter } = limited;
    return { valid: false, code: 'RATE_LIMITED', principal, ratelimit, retryAfter };
  }
  const refused: Verdict = { valid: false, code: 'USAGE_EXCEEDED', principal, credits: limited.credits };
  if (limited.retryAfter !== undefined) refused.retryAfter = limited.retryAfter;
  return refused;
}

/** DISABLED is said only when the secret matched, as EXPIRED is: the holder learns what using it would. */
function enabledOrNot(row: ApiKeyRow, principal: Principal, minLevel: number): Verdict {
  return row.enabled === false ? { valid: false, code: 'DISABLED', principal } : judged(principal, minLevel);
}

/** A valid verdict below `minLevel` becomes INSUFFICIENT_LEVEL. */
export function judged(principal: Principal, minLevel: number): Verdict {
  return principal.level < minLevel
    ? { valid: false, code: 'INSUFFICIENT_LEVEL', principal }
    : { valid: true, code: 'VALID', principal };
}

export function keyPrincipal(row: ApiKeyRow): Principal {
  const principal: Principal = {
    type: 'key',
    key: row.id,
    userId: row.userId,
    level: row.level,
    name: row.name,
    expiresAt: new Date(row.expiresAt).toISOString(),
  };
  if (row.meta != null) principal.meta = parsedMeta(row);
  return principal;
}

// A cached row keeps its parsed meta: a key with meta costs one JSON.parse per cache fill, not per verify.
const metas = new WeakMap<ApiKeyRow, KeyMeta>();
function parsedMeta(row: ApiKeyRow): KeyMeta {
  let meta = metas.get(row);
  if (meta === undefined) {
    meta = metaOf(row) as KeyMeta;
    metas.set(row, meta);
  }
  return meta;
}

export function tokenPrincipal(user: TokenUser): Principal {
  const principal: Principal = {
    type: 'jwt',
    userId: user.userId,
    level: user.level,
    expiresAt: new Date(user.expiresAt).toISOString(),
  };
  if (user.subject !== undefined) principal.subject = user.subject;
  return principal;
}
