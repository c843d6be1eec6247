// Credit takes on PostgreSQL, batched: the takes that arrive in the same turn of the event loop are ONE
// call of keygate_take_credits (migration 0006), one transaction and so one commit for all of them.
// The function takes them in order under the pools' row locks, so two takes of one pool in a batch
// see each other and one that finds the pool short is refused, exactly as one statement per take
// would be; replicas stay exact because every take still writes under the row lock before it commits,
// and each take's answer waits for that commit.
import type { SQL } from 'bun';
import type { CreditsTake } from '../../limits/credits';
import { storedCreditsOf, type TakenRow, takeOutcome } from '../credits-take';
import { sameTurnBatches } from './same-turn-batch';
import { unavailableOr } from './unavailable';

type Take = { lineage: string; cost: number; now: number };
type TakeRow = TakenRow & { taken: boolean | null };

export type CreditsTaker = (lineage: string, cost: number, now: number) => Promise<CreditsTake | undefined>;

export function batchedCreditsTaker(sql: SQL): CreditsTaker {
  const take = sameTurnBatches<Take, CreditsTake | undefined>(async (takes) => {
    const rows = (await sql`SELECT * FROM keygate_take_credits(
      ${sql.array(
        takes.map((t) => t.lineage),
        'TEXT',
      )},
      ${sql.array(
        takes.map((t) => t.cost),
        'INT',
      )},
      ${sql.array(
        takes.map((t) => t.now),
        'BIGINT',
      )})`.catch(unavailableOr)) as TakeRow[];
    return rows.map((row, i) => {
      const { cost, now } = takes[i] as Take;
      if (row.taken === null) return undefined;
      if (row.taken) return takeOutcome(row, undefined, cost, now);
      return takeOutcome(undefined, storedCreditsOf(row), cost, now);
    });
  });
  return (lineage, cost, now) => take({ lineage, cost, now });
}

/** One taker per connection pool, so the store's method can reach it without a field of its own. */
const takers = new WeakMap<SQL, CreditsTaker>();

export function creditsTakerOf(sql: SQL): CreditsTaker {
  let taker = takers.get(sql);
  if (taker === undefined) {
    taker = batchedCreditsTaker(sql);
    takers.set(sql, taker);
  }
  return taker;
}
