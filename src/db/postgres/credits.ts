// The guarded takes of credits on PostgreSQL, from a key's (lineage's) pool and from a user's
// policy's pool. A key's pool alone: batched with the other takes of the same turn of the event loop
// (credits-batch.ts). A user's pool alone: one statement committed on its own, exact however many
// replicas take at once. Two pools: one transaction, the user's pool first (so two keys of one user lock the rows in
// the same order), rolled back whole when the key's pool refuses.
import type { SQL } from 'bun';
import { PgDialect } from 'drizzle-orm/pg-core';
import type { CreditPools, CreditsPool, CreditsTake, PoolsTake } from '../../limits/credits';
import {
  type CreditsColumns,
  KEY_CREDITS_COLUMNS,
  renderedTake,
  secondPoolRefusal,
  storedCreditsOf,
  type TakenRow,
  takeFromPools,
  takeOutcome,
  USER_CREDITS_COLUMNS,
} from '../credits-take';
import { creditsTakerOf } from './credits-batch';
import { unavailableOr } from './unavailable';

export function postgresCreditTakes(sql: SQL) {
  const dialect = new PgDialect();
  const prepare = (columns: CreditsColumns) => ({
    take: renderedTake(dialect, columns),
    read: `SELECT remaining, refill_amount, refill_interval_ms, refilled_at FROM ${columns.table} WHERE ${columns.id} = $1`,
  });
  const pools = { key: prepare(KEY_CREDITS_COLUMNS), user: prepare(USER_CREDITS_COLUMNS) };

  const takeFrom = async (
    client: Pick<SQL, 'unsafe'>,
    pool: CreditsPool,
    id: string | number,
    cost: number,
    now: number,
  ): Promise<CreditsTake | undefined> => {
    const { take, read } = pools[pool];
    const [taken] = (await client.unsafe(take.text, take.params(id, cost, now))) as TakenRow[];
    if (taken !== undefined) return takeOutcome(taken, undefined, cost, now);
    const [row] = (await client.unsafe(read, [id])) as TakenRow[];
    return takeOutcome(undefined, row && storedCreditsOf(row), cost, now);
  };

  const batched = creditsTakerOf(sql);
  return (creditPools: CreditPools, cost: number, now: number): Promise<PoolsTake | undefined> => {
    // A key's own pool alone (the common case): with the other takes of this turn, one call.
    if (creditPools.user === undefined && creditPools.key !== undefined) {
      return batched(creditPools.key, cost, now).then((take) => take && { ...take, pool: 'key' as const });
    }
    const both = creditPools.key !== undefined && creditPools.user !== undefined;
    const run = (client: Pick<SQL, 'unsafe'>) =>
      Promise.resolve(takeFromPools(creditPools, (pool, id) => takeFrom(client, pool, id, cost, now)));
    return (both ? sql.begin((tx) => run(tx)) : run(sql)).catch(secondPoolRefusal).catch(unavailableOr);
  };
}
