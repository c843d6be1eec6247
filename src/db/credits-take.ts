// The guarded take of credits as one statement, the same text on SQLite (3.35 or later, for RETURNING)
// and PostgreSQL: a due refill is applied lazily in the same write that takes `cost`, and the write
// happens only when the credits at that moment cover `cost`, so concurrent takes on any number of
// replicas never spend more than was granted. No row comes back when the take is refused (or the key
// has no credits); the caller then reads the row and asks src/limits/credits.ts why.
import { type SQL, sql } from 'drizzle-orm';

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

/**
 * `UPDATE … RETURNING remaining, refilled_at` for one take: `cost` 0..1000, `now` in ms (an integer).
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
    RETURNING ${c.remaining} AS remaining, ${c.anchor} AS refilled_at`;
}
