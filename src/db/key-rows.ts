// A key's row as both stores read it: api_keys joined with its lineage's credits (one query, so the
// key cache holds whether a key has credits, and a key without any costs no second read).
import type { ApiKeyRow, KeyUpdate } from '../apikeys/store';

/** The joined columns of key_credits, null when the lineage has none. */
export type JoinedCredits = {
  creditsRemaining: number | null;
  creditsRefillAmount: number | null;
  creditsRefillIntervalMs: number | null;
  creditsRefilledAt: number | null;
  /** What the credits were last set to, and when (absent where a read leaves them out). */
  creditsSetRemaining?: number | null;
  creditsSetAt?: number | null;
};

/** The row of a key read with its credits. */
export function withCredits<R extends JoinedCredits>(joined: R): Omit<R, keyof JoinedCredits> & ApiKeyRow {
  const {
    creditsRemaining,
    creditsRefillAmount,
    creditsRefillIntervalMs,
    creditsRefilledAt,
    creditsSetRemaining,
    creditsSetAt,
    ...row
  } = joined;
  return {
    ...(row as unknown as ApiKeyRow),
    creditsSet:
      creditsSetRemaining == null || creditsSetAt == null
        ? null
        : { remaining: Number(creditsSetRemaining), at: Number(creditsSetAt) },
    credits:
      creditsRemaining === null || creditsRefilledAt === null
        ? null
        : {
            remaining: creditsRemaining,
            refillAmount: creditsRefillAmount,
            refillIntervalMs: creditsRefillIntervalMs,
            refilledAt: creditsRefilledAt,
          },
  } as Omit<R, keyof JoinedCredits> & ApiKeyRow;
}

/**
 * The api_keys columns an update sets (the rate limit's two, for a `ratelimit`; null removes it);
 * its credits are the lineage's row, not a column, and are left to the caller.
 */
export function columnsOfUpdate({ ratelimit, credits: _credits, ...columns }: KeyUpdate) {
  return {
    ...columns,
    ...(ratelimit === undefined
      ? {}
      : { ratelimitLimit: ratelimit?.limit ?? null, ratelimitDuration: ratelimit?.duration ?? null }),
  };
}
