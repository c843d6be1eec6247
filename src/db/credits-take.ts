// The guarded take of credits as one statement, the same text on SQLite (3.35 or later, for RETURNING)
// and PostgreSQL: a due refill is applied lazily in the same write that takes `cost`, and the write
// happens only when the credits at that moment cover `cost`, so concurrent takes on any number of
// replicas never spend more than was granted. No row comes back when the take is refused (or the key
// has no credits); the caller then reads the row and asks src/limits/credits.ts why.
import { fillPlaceholders, type SQL, sql } from 'drizzle-orm';
import { andThen, type SyncOrAsync } from '../core/sync-or-async';
import {
  bindingTake,
  type CreditPools,
  type CreditsPool,
  type CreditsTake,
  type PoolsTake,
  type StoredCredits,
  takeCredits,
} from '../limits/credits';

/** Where a key's credits are stored; the defaults name a table of its own. */
export type CreditsColumns = {
  table: string;
  id: string;
  remaining: string;
  refillAmount: string;
  refillIntervalMs: string;
  refilledAt: string;
};

export const DEFAULT_CREDITS_COLUMNS: CreditsColumns = {
  table: 'credit_pools',
  id: 'id',
  remaining: 'remaining',
  refillAmount: 'refill_amount',
  refillIntervalMs: 'refill_interval_ms',
  refilledAt: 'refilled_at',
};

/** The credits of a key's lineage (migration 0006 on SQLite, 0003 on PostgreSQL). */
export const KEY_CREDITS_COLUMNS: CreditsColumns = {
  ...DEFAULT_CREDITS_COLUMNS,
  table: 'key_credits',
  id: 'lineage',
};

/** The credits pool of a user's policy (migration 0007 on SQLite, 0005 on PostgreSQL). */
export const USER_CREDITS_COLUMNS: CreditsColumns = {
  ...DEFAULT_CREDITS_COLUMNS,
  table: 'user_credits',
  id: 'user_id',
};

/** A take refused by the second pool after the first gave: thrown so the transaction rolls back. */
export class SecondPoolRefused extends Error {
  override name = 'SecondPoolRefused';
  constructor(readonly outcome: PoolsTake) {
    super('the second credits pool refused the take');
  }
}

/** The refusal a rolled-back two-pool take answers; any other failure is rethrown. */
export function secondPoolRefusal(error: unknown): PoolsTake {
  if (error instanceof SecondPoolRefused) return error.outcome;
  throw error;
}

/**
 * Takes `cost` from every pool of `pools`, the user's first, with `takeFrom` (one guarded take from
 * one pool, in the caller's transaction). A refusal by the user's pool writes nothing; a refusal by
 * the key's pool after the user's gave throws SecondPoolRefused, for the caller to roll the user's
 * take back with its transaction and answer the refusal. Undefined when no pool has credits.
 */
export function takeFromPools(
  pools: CreditPools,
  takeFrom: (pool: CreditsPool, id: string | number) => SyncOrAsync<CreditsTake | undefined>,
): SyncOrAsync<PoolsTake | undefined> {
  const user = pools.user === undefined ? undefined : takeFrom('user', pools.user);
  return andThen(user, (fromUser) => {
    const userTake = fromUser && { ...fromUser, pool: 'user' as const };
    if (userTake !== undefined && !userTake.taken) return userTake;
    const key = pools.key === undefined ? undefined : takeFrom('key', pools.key);
    return andThen(key, (fromKey) => {
      const keyTake = fromKey && { ...fromKey, pool: 'key' as const };
      if (keyTake !== undefined && !keyTake.taken) {
        if (userTake !== undefined) throw new SecondPoolRefused(keyTake);
        return keyTake;
      }
      return bindingTake(userTake, keyTake);
    });
  });
}

/** What the statement returns for a take it made. */
export type TakenRow = {
  remaining: number | string;
  refill_amount: number | string | null;
  refill_interval_ms: number | string | null;
  refilled_at: number | string;
};

/**
 * The statement's text rendered once by an engine's dialect, and its parameters for one take: a
 * prepared statement instead of a rendering per verification.
 */
export function renderedTake(
  dialect: { sqlToQuery(statement: SQL): { sql: string; params: unknown[] } },
  columns: CreditsColumns,
): { text: string; params(id: string | number, cost: number, now: number): unknown[] } {
  const query = dialect.sqlToQuery(
    takeCreditsStatement(
      {
        id: sql.placeholder('id') as unknown as string,
        cost: sql.placeholder('cost') as unknown as number,
        now: sql.placeholder('now') as unknown as number,
      },
      columns,
    ),
  );
  return { text: query.sql, params: (id, cost, now) => fillPlaceholders(query.params, { id, cost, now }) };
}

/** A credits row as the engines return it (PostgreSQL's bigints as text) in the rules' terms. */
export function storedCreditsOf(row: TakenRow): StoredCredits {
  const { refill_amount: amount, refill_interval_ms: interval } = row;
  return {
    remaining: Number(row.remaining),
    refillAmount: amount === null ? null : Number(amount),
    refillIntervalMs: interval === null ? null : Number(interval),
    refilledAt: Number(row.refilled_at),
  };
}

/** The take's outcome: `taken` from the returned row, else the refusal the stored credits explain. */
export function takeOutcome(
  taken: TakenRow | undefined,
  stored: StoredCredits | undefined,
  cost: number,
  now: number,
): CreditsTake | undefined {
  if (taken !== undefined) return { taken: true, credits: storedCreditsOf(taken) };
  if (stored === undefined) return undefined;
  const refused = takeCredits(stored, cost, now);
  // A refill another replica's take applied between the two reads: still this take's refusal.
  return refused.taken ? { taken: false, credits: stored, nextRefillAt: undefined } : refused;
}

/**
 * `UPDATE … RETURNING remaining, refill_amount, refill_interval_ms, refilled_at` for one take: `cost` 0..1000, `now` in ms (an integer).
 * Render it with the engine's dialect (drizzle `db.all`/`db.execute`, or the dialect's `sqlToQuery`).
 */
export function takeCreditsStatement(
  { id, cost, now }: { id: string; cost: number; now: number },
  columns: CreditsColumns = DEFAULT_CREDITS_COLUMNS,
): SQL {
  const c = {
    table: sql.identifier(columns.table),
    id: sql.identifier(columns.id),
    remaining: sql.identifier(columns.remaining),
    amount: sql.identifier(columns.refillAmount),
    interval: sql.identifier(columns.refillIntervalMs),
    anchor: sql.identifier(columns.refilledAt),
  };
  // Cast, because an engine that binds a number as a float would turn the division below into a
  // fractional count of refills (BIGINT has integer affinity on SQLite too).
  const nowMs = sql`CAST(${now} AS BIGINT)`;
  const costOf = sql`CAST(${cost} AS INTEGER)`;
  const due = sql`(${c.interval} IS NOT NULL AND ${c.amount} IS NOT NULL AND ${nowMs} >= ${c.anchor} + ${c.interval})`;
  return sql`UPDATE ${c.table} SET
    ${c.remaining} = CASE WHEN ${due} THEN ${c.amount} - ${costOf} ELSE ${c.remaining} - ${costOf} END,
    ${c.anchor} = CASE WHEN ${due}
      THEN ${c.anchor} + ((${nowMs} - ${c.anchor}) / ${c.interval}) * ${c.interval}
      ELSE ${c.anchor} END
    WHERE ${c.id} = ${id} AND ${c.remaining} IS NOT NULL
      AND (CASE WHEN ${due} THEN ${c.amount} ELSE ${c.remaining} END) >= ${costOf}
    RETURNING ${c.remaining} AS remaining, ${c.amount} AS refill_amount, ${c.interval} AS refill_interval_ms,
      ${c.anchor} AS refilled_at`;
}
