// What a key may still do once its verification would be VALID: the rate limits first (the key's own
// and the operator's RATE_LIMIT, counted on its lineage so a key and its successor share them, and its
// user's policy's, one window for all the user's keys), then the credits (the key's pool and its
// user's policy's pool), taken last so that no other refusal takes any. Only VALID answers use the
// limit: a verification whose pool visibly cannot pay (the credits read with the key or the policy,
// refills applied, below its cost) is only checked against the limits, never admitted; any other
// refusal for credits gives its admission back, and until it has, the admission is pending, so a
// verification refused by the limiter meanwhile waits for it and is decided again. A key with none
// of these makes no call at all (and so no database round trip).
import { lineageOf, perRow, rateLimitOf } from '../apikeys/settings';
import type { ApiKeyRow } from '../apikeys/store';
import type { StoredPolicy } from '../apikeys/user-policy';
import type { Clock } from '../core/clock';
import { andThen, type SyncOrAsync } from '../core/sync-or-async';
import {
  type CreditPools,
  type CreditsPool,
  effectiveCredits,
  nextRefillAt,
  type PoolsTake,
  type StoredCredits,
} from '../limits/credits';
import type { PendingAdmissions } from '../limits/pending-admissions';
import {
  type KeyLimit,
  type LimitScope,
  limitsOfKey,
  type RateLimiter,
  type RateLimitRule,
  type RateLimitVerdict,
  wholeSecondsUntil,
} from '../limits/rate-limit';

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
  /** The operator's policy of a user (at once when known), judged fresh at `now`; none when left out. */
  policyOf?: (userId: number, now: number) => SyncOrAsync<StoredPolicy | undefined>;
  /** The admissions of this process still waiting for their credits take. */
  pending: PendingAdmissions;
  clock: Clock;
};

/**
 * A key's own rate limit on its counter (`key:<lineage>`), or null: made once per row, so a limited
 * key's verification builds no counter name, and the limiter may remember its window on it
 * (`consumeKept`).
 */
const ownLimitOf = perRow((row): KeyLimit | null => {
  const own = rateLimitOf(row);
  return own === undefined
    ? null
    : (limitsOfKey({ lineage: lineageOf(row), own, userId: row.userId })[0] ?? null);
});

/** The key's own limit alone in a list, or an empty list, made once per row (for the paths with credits). */
const ownLimitsOf = perRow((row): readonly KeyLimit[] => {
  const own = ownLimitOf(row);
  return own === null ? NO_LIMITS : Object.freeze([own]);
});
const NO_LIMITS: readonly KeyLimit[] = Object.freeze([]);

/** How many times a verification refused while admissions were pending waits for them and asks again. */
const SETTLE_ROUNDS = 8;

const ALLOWED: LimitsOutcome = Object.freeze({ allowed: true });

/**
 * Counts a verification of `row` costing `cost` credits against its limits and credits; `now`, the
 * verification's reading of the clock, tells whether the policy known is fresh.
 */
export function applyUsageLimits(
  limits: UsageLimits,
  row: ApiKeyRow,
  cost: number,
  now: number,
): SyncOrAsync<LimitsOutcome> {
  const policy = limits.policyOf?.(row.userId, now);
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
  const own = ownLimitOf(row);
  const user = policy?.ratelimit ?? undefined;
  const operator = limits.operatorRule;
  const userPool = policy?.credits != null;
  const paying = row.credits != null || userPool;
  if (user === undefined && operator === undefined) {
    if (own === null && !paying) return ALLOWED;
    // A key under its own limit only (the common case): counted on the limit kept with its row, no
    // list, no closure (an in-memory limiter answers at once).
    if (own !== null && !paying) {
      const decision = limits.limiter.consumeKept(own);
      return decision instanceof Promise
        ? decision.then((settled) => ownLimited(limits, own, settled))
        : ownLimited(limits, own, decision);
    }
  }
  const lineage = lineageOf(row);
  const counted =
    user === undefined && operator === undefined
      ? ownLimitsOf(row)
      : limitsOfKey({ lineage, own: own ?? undefined, userId: row.userId, user, operator });
  const short = paying ? visiblyShort(limits, row.credits, policy?.credits, cost) : undefined;
  if (short !== undefined) {
    // Refused for credits whatever the limits say: checked against them (RATE_LIMITED comes first),
    // never admitted, so it holds no slot another verification needs.
    const checked = counted.length === 0 ? undefined : settling(limits, counted, false);
    return andThen(checked, (decision) => rateLimited(decision, counted) ?? short);
  }
  if (!paying) {
    // Limits only (`counted` is not empty): no closure on the hot path (an in-memory limiter answers at once).
    const decision = settling(limits, counted, true);
    return decision instanceof Promise
      ? decision.then((settled) => limitedOnly(settled, counted))
      : limitedOnly(decision, counted);
  }
  // A paying verification's admission is pending from the moment the limiter answers (not a
  // microtask later, when a refusal of the same batch may already be looking for it) until its take
  // has settled and any refund is done.
  let settle: (() => void) | undefined;
  const held = () => {
    settle = limits.pending.hold(counted);
  };
  return andThen(
    counted.length === 0 ? undefined : settling(limits, counted, true, held),
    (decision): SyncOrAsync<LimitsOutcome> => {
      const refusal = rateLimited(decision, counted);
      if (refusal !== undefined) return refusal;
      const ratelimit = decision && reportOf(decision, counted);
      const allowed: LimitsOutcome & { allowed: true } =
        ratelimit === undefined ? { allowed: true } : { allowed: true, ratelimit };
      const pools: CreditPools = {};
      if (row.credits != null) pools.key = lineage;
      if (userPool) pools.user = row.userId;
      const settled = <T>(value: SyncOrAsync<T>): SyncOrAsync<T> => {
        if (settle === undefined) return value;
        if (!(value instanceof Promise)) {
          settle();
          return value;
        }
        return value.finally(settle);
      };
      return limits.takeCredits(pools, cost, limits.clock()).then(
        (take): SyncOrAsync<LimitsOutcome> => {
          // Removed by an update since the key was read: nothing to take from.
          if (take === undefined) return settled(allowed);
          const credits: CreditsReport = { remaining: take.credits.remaining, scope: take.pool };
          if (take.taken) return settled({ ...allowed, credits });
          const refused: LimitsOutcome = {
            allowed: false,
            code: 'USAGE_EXCEEDED',
            credits,
            ...(take.nextRefillAt === undefined
              ? {}
              : { retryAfter: wholeSecondsUntil(take.nextRefillAt, limits.clock()) }),
          };
          return settled(andThen(refundOf(limits, counted, decision), () => refused));
        },
        (error: unknown) =>
          settled(andThen(refundOf(limits, counted, decision), () => Promise.reject(error))),
      );
    },
  );
}

/**
 * The limiter's verdict (`consume` when `take`, else `check`); when it refuses while admissions on
 * these counters are pending (waiting for their credits take, which may give them back), waits for
 * those to settle and asks again, a few rounds at most. `held` is told of an admission at once.
 */
function settling(
  limits: UsageLimits,
  counted: readonly KeyLimit[],
  take: boolean,
  held?: () => void,
  round = 0,
): SyncOrAsync<RateLimitVerdict> {
  const asked = take ? limits.limiter.consume(counted) : limits.limiter.check(counted);
  // No closure when the limiter answers at once (in memory).
  return asked instanceof Promise
    ? asked.then((decision) => decided(decision, limits, counted, take, held, round))
    : decided(asked, limits, counted, take, held, round);
}

function decided(
  decision: RateLimitVerdict,
  limits: UsageLimits,
  counted: readonly KeyLimit[],
  take: boolean,
  held: (() => void) | undefined,
  round: number,
): SyncOrAsync<RateLimitVerdict> {
  if (decision.allowed) {
    if (decision.ticket !== undefined) held?.();
    return decision;
  }
  const pending = round < SETTLE_ROUNDS ? limits.pending.settled(counted) : undefined;
  return pending === undefined
    ? decision
    : pending.then(() => settling(limits, counted, take, held, round + 1));
}

/**
 * A verification under its key's own limit only: allowed with the limit reported, or, refused, as
 * `settling` decides (after any admission pending on the counter has settled).
 */
function ownLimited(
  limits: UsageLimits,
  own: KeyLimit,
  decision: RateLimitVerdict,
): SyncOrAsync<LimitsOutcome> {
  if (decision.allowed) return { allowed: true, ratelimit: reportIn(decision, own.scope) };
  const counted = [own];
  return andThen(decided(decision, limits, counted, true, undefined, 0), (settled) =>
    limitedOnly(settled, counted),
  );
}

/** A verification under limits and no credits: RATE_LIMITED, or allowed with the limit reported. */
function limitedOnly(decision: RateLimitVerdict, counted: readonly KeyLimit[]): LimitsOutcome {
  return rateLimited(decision, counted) ?? { allowed: true, ratelimit: reportOf(decision, counted) };
}

/** The RATE_LIMITED answer of a refused decision; undefined when it passed (or there was none). */
function rateLimited(
  decision: RateLimitVerdict | undefined,
  counted: readonly KeyLimit[],
): LimitsOutcome | undefined {
  if (decision === undefined || decision.allowed) return undefined;
  return {
    allowed: false,
    code: 'RATE_LIMITED',
    ratelimit: reportOf(decision, counted),
    retryAfter: decision.retryAfterSeconds,
  };
}

/**
 * USAGE_EXCEEDED when a pool, as read with the key or the policy and with its due refills applied,
 * holds less than `cost`: the stored count only falls between refills (an update that raises it
 * reaches every replica's cache within a second), so the store's take would refuse too. The user's
 * pool is asked first, as the take does. Undefined when each pool looks able to pay.
 */
function visiblyShort(
  limits: UsageLimits,
  keyCredits: StoredCredits | null | undefined,
  userCredits: StoredCredits | null | undefined,
  cost: number,
): LimitsOutcome | undefined {
  const now = limits.clock();
  const shortOf = (stored: StoredCredits | null | undefined, scope: CreditsPool) => {
    if (stored == null) return undefined;
    const { remaining } = effectiveCredits(stored, now);
    if (remaining >= cost) return undefined;
    const refill = nextRefillAt(stored, now);
    return {
      allowed: false,
      code: 'USAGE_EXCEEDED',
      credits: { remaining, scope },
      ...(refill === undefined ? {} : { retryAfter: wholeSecondsUntil(refill, now) }),
    } as const;
  };
  return shortOf(userCredits, 'user') ?? shortOf(keyCredits, 'key');
}

/** Gives a refused verification's admission back: only VALID answers use the limit. */
function refundOf(
  limits: UsageLimits,
  counted: readonly KeyLimit[],
  decision: RateLimitVerdict | undefined,
): SyncOrAsync<void> {
  if (decision?.ticket === undefined) return undefined;
  return limits.limiter.refund(counted, decision.ticket);
}

function reportOf(decision: RateLimitVerdict, counted: readonly KeyLimit[]): RateLimitReport {
  return reportIn(decision, (counted[decision.reportedIndex] as KeyLimit).scope);
}

function reportIn(decision: RateLimitVerdict, scope: LimitScope): RateLimitReport {
  const { reported } = decision;
  return {
    limit: reported.limit,
    duration: reported.duration,
    remaining: reported.remaining,
    reset: reported.reset,
    now: decision.now,
    scope,
  };
}
