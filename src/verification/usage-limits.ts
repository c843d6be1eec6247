// What a key may still do once its verification would be VALID: the rate limits first (the key's own
// and the operator's RATE_LIMIT, counted on its lineage so a key and its successor share them, and its
// user's policy's, one window for all the user's keys), then the credits (the key's pool and its
// user's policy's pool), taken last so that no other refusal takes any. A refusal for credits gives
// the rate limit's admission back. A key with none of these makes no call at all (and so no database
// round trip).
import { lineageOf, rateLimitOf } from '../apikeys/settings';
import type { ApiKeyRow } from '../apikeys/store';
import type { StoredPolicy } from '../apikeys/user-policy';
import type { Clock } from '../core/clock';
import { andThen, type SyncOrAsync } from '../core/sync-or-async';
import type { CreditPools, PoolsTake } from '../limits/credits';
import {
  type CountedLimit,
  consumeIfLimited,
  limitsOfKey,
  type RateLimiter,
  type RateLimitRule,
  type RateLimitVerdict,
  wholeSecondsUntil,
} from '../limits/rate-limit';

/** Whose limit an answer reports: the key's own, its user's policy, or the operator's RATE_LIMIT. */
export type LimitScope = 'key' | 'user' | 'operator';

/** The limit an answer reports (ms times; the answers write `reset` as ISO, headers as seconds). */
export type RateLimitReport = {
  limit: number;
  duration: number;
  remaining: number;
  reset: number;
  /** When the limiter decided, on its clock: `reset` is counted from it. */
  now: number;
  scope: LimitScope;
};

export type CreditsReport = { remaining: number; scope: LimitScope };

/** How a verification the key's other rules allowed comes out. */
export type LimitsOutcome =
  | { allowed: true; ratelimit?: RateLimitReport; credits?: CreditsReport }
  | { allowed: false; code: 'RATE_LIMITED'; ratelimit: RateLimitReport; retryAfter: number }
  | { allowed: false; code: 'USAGE_EXCEEDED'; credits: CreditsReport; retryAfter?: number };

export type UsageLimits = {
  limiter: RateLimiter;
  /** The operator's RATE_LIMIT; undefined: none. */
  operatorRule: RateLimitRule | undefined;
  /** The store's guarded take from the pools, committed before it resolves. */
  takeCredits(pools: CreditPools, cost: number, now: number): Promise<PoolsTake | undefined>;
  /** The operator's policy of a user (at once when known); none when left out. */
  policyOf?: (userId: number) => SyncOrAsync<StoredPolicy | undefined>;
  clock: Clock;
};

const ALLOWED: LimitsOutcome = Object.freeze({ allowed: true });

/** Counts a verification of `row` costing `cost` credits against its limits and credits. */
export function applyUsageLimits(
  limits: UsageLimits,
  row: ApiKeyRow,
  cost: number,
): SyncOrAsync<LimitsOutcome> {
  const policy = limits.policyOf?.(row.userId);
  return policy instanceof Promise
    ? policy.then((known) => limitedBy(limits, row, cost, known))
    : limitedBy(limits, row, cost, policy);
}

function limitedBy(
  limits: UsageLimits,
  row: ApiKeyRow,
  cost: number,
  policy: StoredPolicy | undefined,
): SyncOrAsync<LimitsOutcome> {
  const own = rateLimitOf(row);
  const user = policy?.ratelimit ?? undefined;
  const userPool = policy?.credits != null;
  if (
    own === undefined &&
    user === undefined &&
    limits.operatorRule === undefined &&
    row.credits == null &&
    !userPool
  ) {
    return ALLOWED;
  }
  const lineage = lineageOf(row);
  // Built anew each time: a WeakMap keeping them per cached row cost more to look up (and to collect).
  const counted = limitsOfKey({ lineage, own, userId: row.userId, user, operator: limits.operatorRule });
  return andThen(consumeIfLimited(limits.limiter, counted), (decision) => {
    const ratelimit = decision && reportOf(decision, counted);
    if (decision !== undefined && ratelimit !== undefined && !decision.allowed) {
      return {
        allowed: false,
        code: 'RATE_LIMITED',
        ratelimit,
        retryAfter: decision.retryAfterSeconds,
      } as const;
    }
    const allowed: LimitsOutcome & { allowed: true } =
      ratelimit === undefined ? { allowed: true } : { allowed: true, ratelimit };
    const pools: CreditPools = {};
    if (row.credits != null) pools.key = lineage;
    if (userPool) pools.user = row.userId;
    if (pools.key === undefined && pools.user === undefined) return allowed;
    return limits.takeCredits(pools, cost, limits.clock()).then(
      (take): SyncOrAsync<LimitsOutcome> => {
        // Removed by an update since the key was read: nothing to take from.
        if (take === undefined) return allowed;
        const credits: CreditsReport = { remaining: take.credits.remaining, scope: take.pool };
        if (take.taken) return { ...allowed, credits };
        const refused: LimitsOutcome = {
          allowed: false,
          code: 'USAGE_EXCEEDED',
          credits,
          ...(take.nextRefillAt === undefined
            ? {}
            : { retryAfter: wholeSecondsUntil(take.nextRefillAt, limits.clock()) }),
        };
        return andThen(refundOf(limits, counted, decision), () => refused);
      },
      (error: unknown) => andThen(refundOf(limits, counted, decision), () => Promise.reject(error)),
    );
  });
}

/** Gives a refused verification's admission back: only VALID answers use the limit. */
function refundOf(
  limits: UsageLimits,
  counted: readonly CountedLimit[],
  decision: RateLimitVerdict | undefined,
): SyncOrAsync<void> {
  if (decision?.ticket === undefined) return undefined;
  return limits.limiter.refund(counted, decision.ticket);
}

function reportOf(decision: RateLimitVerdict, counted: readonly CountedLimit[]): RateLimitReport {
  const { reported } = decision;
  const counter = counted[decision.reportedIndex]?.counter ?? '';
  return {
    limit: reported.limit,
    duration: reported.duration,
    remaining: reported.remaining,
    reset: reported.reset,
    now: decision.now,
    scope: counter.slice(0, counter.indexOf(':')) as LimitScope,
  };
}
