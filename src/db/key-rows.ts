// A key's row as both stores read it: api_keys joined with its lineage's credits (one query, so the
// key cache holds whether a key has credits, and a key without any costs no second read).
import type { ApiKeyRow } from '../apikeys/store';

/** The joined columns of key_credits, null when the lineage has none. */
export type JoinedCredits = {
  creditsRemaining: number | null;
  creditsRefillAmount: number | null;
  creditsRefillIntervalMs: number | null;
  creditsRefilledAt: number | null;
};

/** The row of a key read with its credits. */
export function withCredits<R extends JoinedCredits>(joined: R): Omit<R, keyof JoinedCredits> & ApiKeyRow {
  const { creditsRemaining, creditsRefillAmount, creditsRefillIntervalMs, creditsRefilledAt, ...row } =
    joined;
  return {
    ...(row as unknown as ApiKeyRow),
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
