// One credential in, one verdict out: the rules shared by POST /apikeys/verify and forward-auth.
// A key is authenticated by the apikeys service (the key cache, one hash, one compare), a token by
// the JwtAuthority and mapped to its user (auth/token-users.ts); the verdict is then judged against
// where a key is used from, the level and the permissions asked for, and a key that would be VALID is
// then held to its rate limits and credits (usage-limits.ts). With mapped user ids the principal also
// names the provider's subject.
import type { ApiKeyService, KeyAuthentication } from '../apikeys/service';
import {
  allowedAddressesOf,
  allowedIpsOf,
  heldPermissionsOf,
  type KeyMeta,
  metaOf,
  permissionsOf,
  perRow,
} from '../apikeys/settings';
import type { ApiKeyRow } from '../apikeys/store';
import type { TokenRefusal } from '../auth/jwt';
import type { TokenUser, TokenUsers } from '../auth/token-users';
import { andThen, type SyncOrAsync } from '../core/sync-or-async';
import type { Address } from '../network/address';
import { type HeldPermissions, heldPermissions } from '../permissions/held';
import type { PermissionQuery } from '../permissions/query';
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
      permissions?: readonly string[];
      allowedIps?: readonly string[];
      subject?: string;
    }
  | {
      type: 'jwt';
      userId: number;
      level: number;
      expiresAt: string;
      permissions?: readonly string[];
      subject?: string;
    };

export type Verdict =
  | { valid: true; code: 'VALID'; principal: Principal; ratelimit?: RateLimitReport; credits?: CreditsReport }
  | {
      valid: false;
      code: 'DISABLED' | 'IP_NOT_ALLOWED' | 'INSUFFICIENT_LEVEL' | 'INSUFFICIENT_PERMISSIONS';
      principal: Principal;
    }
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

/** What a credential is asked to have: a level and permissions (every query satisfied). */
export type Requirements = { minLevel?: number; permissions?: readonly PermissionQuery[] };

/**
 * How a key is checked: the requirements, the credits a VALID answer takes (default 1), and the
 * client's address, asked only of a key that has allowedIps (undefined: unknown, which no list
 * contains, so such a key is refused).
 */
export type KeyCheck = Requirements & { cost?: number; clientAddress?: () => Address | undefined };

/**
 * Told the outcome of each verify or forward-auth check (metrics): the scheme of the credential
 * (`none` when there was none) and the verdict's code, or NO_CREDENTIALS / MALFORMED for the
 * forward-auth refusals that come before a verdict.
 */
/** What the limits did to a key, for the events derived from it (webhooks/derived.ts). */
export type LimitsNoticed = {
  rateLimited(row: ApiKeyRow, ratelimit: { limit: number; duration: number; scope: string }): void;
  creditsExhausted(row: ApiKeyRow): void;
  creditsTaken(row: ApiKeyRow, remaining: number): void;
};

export type OnVerdict = (scheme: 'key' | 'jwt' | 'none', code: string) => void;

/**
 * The code the answer of an OnVerdict outcome carries, when it is a verification (the operator's
 * overview counts them): a verdict's own code, and a forward-auth MALFORMED credential's (the
 * X-Keygate-Code it answers with); undefined for NO_CREDENTIALS and NO_RULE, which judge no credential.
 */
export function answeredCode(scheme: 'key' | 'jwt' | 'none', code: string): string | undefined {
  if (scheme === 'none') return undefined;
  if (code === 'MALFORMED') return scheme === 'jwt' ? 'INVALID_TOKEN' : 'NOT_FOUND';
  return code;
}

export function createVerifier({
  tokens,
  service,
  ownerSubject,
  usage,
  limits,
  limitsNoticed,
}: {
  tokens: TokenUsers;
  service: Pick<ApiKeyService, 'authenticateKey'>;
  /** With mapped user ids: the subject a key's owner was given to (at once when remembered). */
  ownerSubject?: (userId: number) => SyncOrAsync<string | undefined>;
  /** Told each verdict on an existing key (a new code is counted by usageOutcomeOf, denied by default). */
  usage?: UsageRecorder;
  /** Rate limits and credits; without them no key is limited (tests of the other rules). */
  limits?: UsageLimits;
  /** Told what the limits did to a key (the webhooks' derived events); must not throw or wait. */
  limitsNoticed?: LimitsNoticed;
}) {
  // The steps of a key's verification, each a function of its own (no closure made per request): a
  // key in the key cache goes through all of them at once, without a promise.
  const keyVerdict = (outcome: KeyAuthentication, check: KeyCheck): SyncOrAsync<Verdict> => {
    if (outcome.status === 'not-found') return { valid: false, code: 'NOT_FOUND' };
    if (outcome.status === 'expired') return { valid: false, code: 'EXPIRED' };
    const principal = keyPrincipal(outcome.row);
    if (ownerSubject === undefined) return keyJudged(outcome.row, principal, check);
    // The key's principal is shared: one with a subject is a copy.
    return andThen(ownerSubject(principal.userId), (subject) =>
      keyJudged(outcome.row, subject === undefined ? principal : { ...principal, subject }, check),
    );
  };
  const checked = (key: string, outcome: KeyAuthentication, check: KeyCheck): SyncOrAsync<Verdict> => {
    const first = keyVerdict(outcome, check);
    const cost = check.cost ?? 1;
    return first instanceof Promise
      ? first.then((settled) => limited(key, outcome, settled, cost))
      : limited(key, outcome, first, cost);
  };
  const limited = (key: string, outcome: KeyAuthentication, judged: Verdict, cost: number) => {
    if (!judged.valid || limits === undefined || outcome.status !== 'valid')
      return counted(key, outcome, judged);
    const applied = applyUsageLimits(limits, outcome.row, cost, outcome.at);
    const row = outcome.row;
    return applied instanceof Promise
      ? applied.then((settled) => counted(key, outcome, limitedVerdict(judged, noticed(row, settled))))
      : counted(key, outcome, limitedVerdict(judged, noticed(row, applied)));
  };
  const noticed = (row: ApiKeyRow, outcome: LimitsOutcome): LimitsOutcome => {
    if (limitsNoticed === undefined) return outcome;
    if (outcome.allowed) {
      if (outcome.credits?.scope === 'key') limitsNoticed.creditsTaken(row, outcome.credits.remaining);
    } else if (outcome.code === 'RATE_LIMITED') limitsNoticed.rateLimited(row, outcome.ratelimit);
    else if (outcome.credits.scope === 'key') limitsNoticed.creditsExhausted(row);
    return outcome;
  };
  const counted = (key: string, outcome: KeyAuthentication, final: Verdict): Verdict => {
    // Only ids that name a key are counted (a wrong secret carries its key's id); an unknown id costs
    // the counter what a wrong secret does, and counts nothing.
    if (usage !== undefined) {
      if (outcome.status !== 'not-found')
        usage.recordRow(outcome.row, usageOutcomeOf(final.code), outcome.at);
      else if (outcome.keyId !== undefined) usage.record(outcome.keyId, 'denied');
      else usage.recordUnknown(key);
    }
    return final;
  };
  return {
    /** At once on a key cache hit or a synchronous store's read (no promise), else a promise. */
    verifyKey(key: string, secret: string, check: KeyCheck = {}): SyncOrAsync<Verdict> {
      const outcome = service.authenticateKey(key, secret);
      return outcome instanceof Promise
        ? outcome.then((settled) => checked(key, settled, check))
        : checked(key, outcome, check);
    },

    /** A token is never refused by address, nor rate limited. */
    async verifyToken(token: string, required: Requirements = {}): Promise<Verdict> {
      const check = await tokens.verify(token);
      if (!check.ok) return { valid: false, code: 'INVALID_TOKEN', reason: check.reason };
      return judged(tokenPrincipal(check.user), check.user.held, required);
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

/**
 * A key whose secret matched, in the contract's order: DISABLED, IP_NOT_ALLOWED, then the
 * requirements. Each is said only when the secret matched, as EXPIRED is: the holder learns what
 * using it would.
 */
function keyJudged(row: ApiKeyRow, principal: Principal, check: KeyCheck): Verdict {
  if (row.enabled === false) return { valid: false, code: 'DISABLED', principal };
  if (row.allowedIps != null && allowedAddressesOf(row)?.contains(check.clientAddress?.()) !== true) {
    return { valid: false, code: 'IP_NOT_ALLOWED', principal };
  }
  // What the key holds is looked up (a slot on its row) only when permissions are asked.
  return judged(principal, check.permissions === undefined ? NOTHING_ASKED : heldPermissionsOf(row), check);
}

/** Stands for what a key holds when no permissions are asked: `judged` then never reads it. */
const NOTHING_ASKED: HeldPermissions = heldPermissions(undefined);

/** INSUFFICIENT_LEVEL below `minLevel`, then INSUFFICIENT_PERMISSIONS for a query not satisfied. */
export function judged(principal: Principal, held: HeldPermissions, required: Requirements): Verdict {
  if (principal.level < (required.minLevel ?? 0))
    return { valid: false, code: 'INSUFFICIENT_LEVEL', principal };
  const queries = required.permissions;
  if (queries !== undefined) {
    for (let i = 0; i < queries.length; i++) {
      if (!(queries[i] as PermissionQuery).satisfiedBy(held)) {
        return { valid: false, code: 'INSUFFICIENT_PERMISSIONS', principal };
      }
    }
  }
  return { valid: true, code: 'VALID', principal };
}

/**
 * A key's principal, as its row states it: made once per row (a key cache fill makes new rows; an
 * update, a new one), then shared, so it is frozen; its JSON text is made with it and kept when it is
 * short (`principalJson`), so a large meta does not double what the key cache holds, and so are the
 * answers written around it once made (`allowedBody`, `validBody`).
 */
export const keyPrincipal = perRow((row): Principal => {
  const principal: Principal = {
    type: 'key',
    key: row.id,
    userId: row.userId,
    level: row.level,
    name: row.name,
    expiresAt: new Date(row.expiresAt).toISOString(),
  };
  if (row.meta != null) principal.meta = metaOf(row);
  if (row.permissions != null) principal.permissions = permissionsOf(row);
  if (row.allowedIps != null) principal.allowedIps = allowedIpsOf(row);
  const json = JSON.stringify(principal);
  // Not enumerable: JSON and a spread leave it out (a copy with a subject has none).
  if (json.length <= KEPT_TEXT_LENGTH) {
    const kept: KeptText = { json, allowed: undefined, valid: undefined };
    Object.defineProperty(principal, KEPT, { value: kept });
  }
  return Object.freeze(principal);
});

/**
 * What a key's principal keeps of its JSON: the text, and the two answers most verifications send,
 * each made on its first use. An answer written around the text anew for every request is a string
 * the engine must join (copy) again each time before it is sent.
 */
type KeptText = { json: string; allowed: string | undefined; valid: string | undefined };
const KEPT = Symbol('kept');
/** A principal's text is kept up to this length (most are 150-300 characters; meta may take 2 KB). */
const KEPT_TEXT_LENGTH = 512;

function keptOf(principal: Principal): KeptText | undefined {
  return (principal as { [KEPT]?: KeptText })[KEPT];
}

/** JSON.stringify(principal): a key's principal keeps its text, any other is written anew. */
export function principalJson(principal: Principal): string {
  return keptOf(principal)?.json ?? JSON.stringify(principal);
}

/** Forward-auth's allow body: JSON.stringify({ result: 'success', principal }). */
export function allowedBody(principal: Principal): string {
  return answerAround(principal, '{"result":"success","principal":', 'allowed');
}

/** Verify's VALID answer: JSON.stringify({ result: 'success', valid: true, code: 'VALID', principal }). */
export function validBody(principal: Principal): string {
  return answerAround(principal, '{"result":"success","valid":true,"code":"VALID","principal":', 'valid');
}

/** `start`, the principal's JSON and `}`: kept in `slot` once made, when the principal keeps its text. */
function answerAround(principal: Principal, start: string, slot: 'allowed' | 'valid'): string {
  const kept = keptOf(principal);
  if (kept === undefined) return `${start}${JSON.stringify(principal)}}`;
  kept[slot] ??= `${start}${kept.json}}`;
  return kept[slot];
}

export function tokenPrincipal(user: TokenUser): Principal {
  const principal: Principal = {
    type: 'jwt',
    userId: user.userId,
    level: user.level,
    expiresAt: new Date(user.expiresAt).toISOString(),
  };
  if (user.permissions.length > 0) principal.permissions = user.permissions;
  if (user.subject !== undefined) principal.subject = user.subject;
  return principal;
}
