// A key's settings beyond name, level and expiry: free-form metadata, enabled, its own rate limit and
// its credits; how they are stored and how key info shows them. No HTTP, no SQL.
import { effectiveCredits } from '../limits/credits';
import type { ApiKeyRow, StoredCredits } from './store';

export type RateLimitSetting = { limit: number; duration: number };
export type CreditsSetting = { remaining: number; refill?: { amount: number; interval: number } };
export type KeyMeta = Record<string, unknown>;

/** The optional settings of a create (absent: none, and enabled). */
export type KeySettings = {
  meta?: KeyMeta;
  enabled?: boolean;
  ratelimit?: RateLimitSetting;
  credits?: CreditsSetting;
};

export const META_MAX_BYTES = 2048;

/** Credits as stored: set at `now`, which starts the refill clock. */
export function storedCredits(credits: CreditsSetting, now: number): StoredCredits {
  return {
    remaining: credits.remaining,
    refillAmount: credits.refill?.amount ?? null,
    refillIntervalMs: credits.refill === undefined ? null : credits.refill.interval * 1000,
    refilledAt: now,
  };
}

/** Credits as key info shows them: the remaining count at `now` (a due refill applied), and the refill. */
export function creditsView(credits: StoredCredits, now: number): CreditsSetting {
  const { remaining, refillAmount, refillIntervalMs } = effectiveCredits(credits, now);
  return refillAmount === null || refillIntervalMs === null
    ? { remaining }
    : { remaining, refill: { amount: refillAmount, interval: refillIntervalMs / 1000 } };
}

export function rateLimitOf(row: ApiKeyRow): RateLimitSetting | undefined {
  return row.ratelimitLimit == null || row.ratelimitDuration == null
    ? undefined
    : { limit: row.ratelimitLimit, duration: row.ratelimitDuration };
}

export function metaOf(row: ApiKeyRow): KeyMeta | undefined {
  return row.meta == null ? undefined : (JSON.parse(row.meta) as KeyMeta);
}

/** A key with its own rate limit or credits (the operator's RATE_LIMIT does not count). */
export function isConstrained(row: ApiKeyRow): boolean {
  return rateLimitOf(row) !== undefined || row.credits != null;
}

/** The lineage a key's limits and credits are kept under: its rotation chain's first key, or itself. */
export function lineageOf(row: Pick<ApiKeyRow, 'id' | 'lineage'>): string {
  return row.lineage ?? row.id;
}
