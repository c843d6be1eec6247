// A key's row as both stores read it: api_keys joined with its lineage's credits (one query, so the
// key cache holds whether a key has credits, and a key without any costs no second read).
import { type Column, eq, getTableColumns, sql, type Table } from 'drizzle-orm';
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

/** key_credits' columns on either engine's schema, as the joined read names them. */
type CreditColumns = Record<
  'lineage' | 'remaining' | 'refillAmount' | 'refillIntervalMs' | 'refilledAt' | 'setRemaining' | 'setAt',
  Column
>;

/**
 * The read of a key with its lineage's credits on one engine's schema (the stores, the webhooks' and
 * the operator's lookups all read keys this way): what to select, and the left join's condition.
 */
export function keyWithCreditsOf<K extends Table & Record<'id' | 'lineage', Column>, C extends CreditColumns>(
  apiKeys: K,
  keyCredits: C,
) {
  return {
    columns: {
      ...getTableColumns(apiKeys),
      creditsRemaining: keyCredits.remaining,
      creditsRefillAmount: keyCredits.refillAmount,
      creditsRefillIntervalMs: keyCredits.refillIntervalMs,
      creditsRefilledAt: keyCredits.refilledAt,
      creditsSetRemaining: keyCredits.setRemaining,
      creditsSetAt: keyCredits.setAt,
      // Spelled out: a generic's property reads as the constraint's Column, which select() refuses.
    } as ReturnType<typeof getTableColumns<K>> & {
      creditsRemaining: C['remaining'];
      creditsRefillAmount: C['refillAmount'];
      creditsRefillIntervalMs: C['refillIntervalMs'];
      creditsRefilledAt: C['refilledAt'];
      creditsSetRemaining: C['setRemaining'];
      creditsSetAt: C['setAt'];
    },
    join: eq(keyCredits.lineage, sql`coalesce(${apiKeys.lineage}, ${apiKeys.id})`),
  };
}

/** A key's columns as the stores select them, with its lineage's credits joined. */
export type JoinedKey = Omit<Required<ApiKeyRow>, 'credits' | 'creditsSet'> & JoinedCredits;

/**
 * The row of a key read with its credits: one object literal, so every row the key cache holds has the
 * same shape and a verification's reads of it stay fast (a row spread from the joined one without its
 * credits' columns made them slower). `satisfies` keeps it in step with ApiKeyRow.
 */
export function withCredits(joined: JoinedKey): ApiKeyRow {
  const { creditsRemaining, creditsRefilledAt } = joined;
  return {
    id: joined.id,
    secretHash: joined.secretHash,
    userId: joined.userId,
    level: joined.level,
    name: joined.name,
    createdAt: joined.createdAt,
    expiresAt: joined.expiresAt,
    lineage: joined.lineage,
    rotatedAt: joined.rotatedAt,
    enabled: joined.enabled,
    meta: joined.meta,
    ratelimitLimit: joined.ratelimitLimit,
    ratelimitDuration: joined.ratelimitDuration,
    permissions: joined.permissions,
    allowedIps: joined.allowedIps,
    lastUsedAt: joined.lastUsedAt,
    leakedAt: joined.leakedAt,
    leakSource: joined.leakSource,
    creditsSet:
      joined.creditsSetRemaining == null || joined.creditsSetAt == null
        ? null
        : { remaining: Number(joined.creditsSetRemaining), at: Number(joined.creditsSetAt) },
    credits:
      creditsRemaining === null || creditsRefilledAt === null
        ? null
        : {
            remaining: creditsRemaining,
            refillAmount: joined.creditsRefillAmount,
            refillIntervalMs: joined.creditsRefillIntervalMs,
            refilledAt: creditsRefilledAt,
          },
  } satisfies Required<ApiKeyRow>;
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
