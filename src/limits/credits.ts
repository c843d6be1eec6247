// The credits rules, free of any storage: a key's remaining count, refilled (set, not added) to `amount`
// every `interval` counted from when the credits were set, and a VALID verification taking `cost` only
// when at least `cost` remain. The database applies the same rules in one guarded statement
// (src/db/credits-take.ts); these functions answer what the statement does not return.

export const CREDITS_BOUNDS = {
  remaining: { min: 0, max: 1_000_000_000 },
  refillAmount: { min: 1, max: 1_000_000_000 },
  refillInterval: { min: 1, max: 31_536_000 },
  cost: { min: 0, max: 1_000, default: 1 },
} as const;

/** The credits as stored with a key (ms times). Without refill, both refill fields are null. */
export type StoredCredits = {
  readonly remaining: number;
  readonly refillAmount: number | null;
  readonly refillIntervalMs: number | null;
  /** When the refill clock last started or refilled: the anchor refills are counted from. */
  readonly refilledAt: number;
};

/** The credits as they are at `now`: due refills applied, the anchor moved to the latest refill. */
export function effectiveCredits(stored: StoredCredits, now: number): StoredCredits {
  const { refillAmount, refillIntervalMs, refilledAt } = stored;
  if (refillAmount === null || refillIntervalMs === null || now < refilledAt + refillIntervalMs) {
    return stored;
  }
  const refills = Math.floor((now - refilledAt) / refillIntervalMs);
  return { ...stored, remaining: refillAmount, refilledAt: refilledAt + refills * refillIntervalMs };
}

/** ms of the next refill after `now`, or undefined when the credits have no refill. */
export function nextRefillAt(stored: StoredCredits, now: number): number | undefined {
  const { refillIntervalMs } = stored;
  if (refillIntervalMs === null || stored.refillAmount === null) return undefined;
  return effectiveCredits(stored, now).refilledAt + refillIntervalMs;
}

export type CreditsTake =
  | { readonly taken: true; readonly credits: StoredCredits }
  | { readonly taken: false; readonly credits: StoredCredits; readonly nextRefillAt: number | undefined };

/** A VALID verification's take of `cost`: the credits after it, or the refusal (USAGE_EXCEEDED). */
export function takeCredits(stored: StoredCredits, cost: number, now: number): CreditsTake {
  const credits = effectiveCredits(stored, now);
  if (credits.remaining < cost) return { taken: false, credits, nextRefillAt: nextRefillAt(stored, now) };
  return { taken: true, credits: { ...credits, remaining: credits.remaining - cost } };
}

/** Whose credits a take drew on: the key's (its lineage's) own pool, or its user's policy's. */
export type CreditsPool = 'key' | 'user';

/** The pools a verification draws on; a take must be covered by every one of them. */
export type CreditPools = { key?: string; user?: number };

/**
 * A take from one or two pools: `pool` is the refusing one, else the one with the fewer remaining
 * after the take (the binding one).
 */
export type PoolsTake = CreditsTake & { readonly pool: CreditsPool };

/** Of two takes that both passed, the binding one: fewer remaining (the user's on a tie). */
export function bindingTake(user: PoolsTake | undefined, key: PoolsTake | undefined): PoolsTake | undefined {
  if (user === undefined || key === undefined) return user ?? key;
  return key.credits.remaining < user.credits.remaining ? key : user;
}
