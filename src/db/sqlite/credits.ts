// The guarded takes of credits on SQLite, from a key's (lineage's) pool and from a user's policy's
// pool: prepared once, run inside the group commit's transaction by the key store.
import type { Database, SQLQueryBindings } from 'bun:sqlite';
import { SQLiteSyncDialect } from 'drizzle-orm/sqlite-core';
import type { CreditsPool, CreditsTake } from '../../limits/credits';
import {
  type CreditsColumns,
  KEY_CREDITS_COLUMNS,
  renderedTake,
  storedCreditsOf,
  type TakenRow,
  takeOutcome,
  USER_CREDITS_COLUMNS,
} from '../credits-take';

/** One guarded take from one pool, in the caller's transaction; undefined when it has no credits. */
export function sqliteCreditTakes(client: Database) {
  const dialect = new SQLiteSyncDialect();
  const prepare = (columns: CreditsColumns) => {
    const take = renderedTake(dialect, columns);
    return {
      take,
      statement: client.prepare<TakenRow, SQLQueryBindings[]>(take.text),
      read: client.prepare<TakenRow, [string | number]>(
        `SELECT remaining, refill_amount, refill_interval_ms, refilled_at FROM ${columns.table} WHERE ${columns.id} = ?`,
      ),
    };
  };
  const pools = { key: prepare(KEY_CREDITS_COLUMNS), user: prepare(USER_CREDITS_COLUMNS) };

  return (pool: CreditsPool, id: string | number, cost: number, now: number): CreditsTake | undefined => {
    const { take, statement, read } = pools[pool];
    const taken = statement.get(...(take.params(id, cost, now) as SQLQueryBindings[])) ?? undefined;
    if (taken !== undefined) return takeOutcome(taken, undefined, cost, now);
    const row = read.get(id);
    return takeOutcome(undefined, row === null ? undefined : storedCreditsOf(row), cost, now);
  };
}
