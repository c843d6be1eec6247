// What a rate limiter answers, whatever keeps its counts: the limits a verification is under, the
// verdict (all must pass; the one with the fewer remaining is reported), and the RateLimiter interface
// that the in-memory limiter and the PostgreSQL one both implement, so the rules never learn the engine.

/** A key's `ratelimit` or the operator's RATE_LIMIT: at most `limit` verifications per `duration` seconds. */
export type RateLimitRule = { readonly limit: number; readonly duration: number };

export const RATE_LIMIT_BOUNDS = {
  limit: { min: 1, max: 1_000_000 },
  duration: { min: 1, max: 86_400 },
} as const;

/**
 * One limit a verification must pass, and the counter it counts on. The counter names what shares the
 * limit (e.g. a key and its successor during a rotation's grace period share one); a counter whose rule
 * changed starts afresh.
 */
export type CountedLimit = RateLimitRule & { readonly counter: string };

/** One limit's state for an answer. */
export type LimitState = {
  readonly limit: number;
  readonly duration: number;
  /** Verifications that may pass now. */
  readonly remaining: number;
  /** ms when the whole limit is available again if none arrive. */
  readonly reset: number;
  /** ms when one more verification could pass (the answer's time when one can already). */
  readonly nextAdmission: number;
};

/** What a refund needs to give an admission back: for each counter, the sub-window it was counted in. */
export type RateLimitTicket = readonly { readonly counter: string; readonly epoch: number }[];

export type RateLimitVerdict = {
  readonly allowed: boolean;
  /** The limit reported in the answer: the one with the fewer remaining. */
  readonly reported: LimitState;
  /** Its position among the limits decided on (and so its counter). */
  readonly reportedIndex: number;
  /** Whole seconds (at least 1) until a verification can pass every limit; meaningful when refused. */
  readonly retryAfterSeconds: number;
  /** ms of the decision, on the limiter's clock (the database's for PostgreSQL). */
  readonly now: number;
  /** Present when allowed: gives the admission back through `refund`. */
  readonly ticket?: RateLimitTicket;
};

/**
 * Keeps the counts. Call it only for a verification under at least one limit: a key without any makes
 * no call at all (and so, on PostgreSQL, no round trip).
 */
export interface RateLimiter {
  /** The verdict a verification would get now, counting nothing. */
  check(limits: readonly CountedLimit[]): Promise<RateLimitVerdict> | RateLimitVerdict;
  /** Counts one verification on every limit when all of them allow it, on none otherwise. */
  consume(limits: readonly CountedLimit[]): Promise<RateLimitVerdict> | RateLimitVerdict;
  /**
   * `consume([limit])` of a limit its caller keeps and passes again (a key's own limit, kept with its
   * row): a limiter may remember on it where it counts it.
   */
  consumeKept(limit: CountedLimit): Promise<RateLimitVerdict> | RateLimitVerdict;
  /** Gives back an admission (it passed the limits but was refused for credits). */
  refund(limits: readonly CountedLimit[], ticket: RateLimitTicket): Promise<void> | void;
  /** Starts these counters afresh (the key's `ratelimit` was replaced or removed). */
  forget(counters: readonly string[]): Promise<void> | void;
}

/** The limit an answer reports: the fewest remaining; on a tie, the one whose whole limit returns last. */
export function reportedLimit(states: readonly LimitState[]): LimitState {
  let reported = states[0];
  if (reported === undefined) throw new Error('reportedLimit needs at least one limit');
  for (const state of states) {
    if (
      state.remaining < reported.remaining ||
      (state.remaining === reported.remaining && state.reset > reported.reset)
    ) {
      reported = state;
    }
  }
  return reported;
}

/** Whole seconds, at least 1, from `now` until `at`. */
export function wholeSecondsUntil(at: number, now: number): number {
  return Math.max(1, Math.ceil((at - now) / 1000));
}

/** The verdict for a verification under `states` (each one's state after the decision). */
export function verdictOf(
  allowed: boolean,
  states: readonly LimitState[],
  now: number,
  ticket?: RateLimitTicket,
): RateLimitVerdict {
  // A verification passes only once every limit lets one through: the latest of their next admissions.
  let nextAdmission = Number.NEGATIVE_INFINITY;
  for (const state of states) if (state.nextAdmission > nextAdmission) nextAdmission = state.nextAdmission;
  const reported = reportedLimit(states);
  const verdict: { -readonly [K in keyof RateLimitVerdict]: RateLimitVerdict[K] } = {
    allowed,
    reported,
    reportedIndex: states.indexOf(reported),
    retryAfterSeconds: wholeSecondsUntil(nextAdmission, now),
    now,
  };
  if (ticket !== undefined) verdict.ticket = ticket;
  return verdict;
}

/** The rules a key's verification is under, and what names their counters. */
export type KeyRateLimits = {
  /** The key's rotation chain: a key and its successor share their limits. */
  lineage: string;
  /** The key's own `ratelimit`. */
  own?: RateLimitRule;
  userId: number;
  /** The user's policy: one window for all the user's keys. */
  user?: RateLimitRule;
  /** The operator's RATE_LIMIT: one window per key (lineage). */
  operator?: RateLimitRule;
};

/** Whose limit it is: the key's own, its user's policy, or the operator's RATE_LIMIT. */
export type LimitScope = 'key' | 'user' | 'operator';

/** One of the limits a key's verification is under, with whose it is (the answers' `scope`). */
export type KeyLimit = CountedLimit & { readonly scope: LimitScope };

/**
 * The limits a key's verification is under, each on its own counter, whose name starts with whose
 * limit it is, then what shares it.
 */
export function limitsOfKey({ lineage, own, userId, user, operator }: KeyRateLimits): KeyLimit[] {
  const limits: KeyLimit[] = [];
  if (own !== undefined) limits.push({ ...own, scope: 'key', counter: counterOf('key', lineage) });
  if (user !== undefined) limits.push({ ...user, scope: 'user', counter: counterOf('user', userId) });
  if (operator !== undefined)
    limits.push({ ...operator, scope: 'operator', counter: counterOf('operator', lineage) });
  return limits;
}

/** A counter's name: whose limit it is, then what shares it. */
export function counterOf(scope: LimitScope, id: string | number): string {
  return `${scope}:${id}`;
}

/**
 * Counts a verification under `limits`; undefined, without calling the limiter at all, when there are
 * none, so a key without a limit costs nothing (and no database round trip).
 */
export function consumeIfLimited(
  limiter: RateLimiter,
  limits: readonly CountedLimit[],
): Promise<RateLimitVerdict> | RateLimitVerdict | undefined {
  return limits.length === 0 ? undefined : limiter.consume(limits);
}
