// The RateLimiter on PostgreSQL, exact across any number of replicas: each decision is made by
// keygate_rate_limit (migration 0004), on the database's clock, which refuses from an unlocked read
// and otherwise decides again under the counters' row locks, counting the verification only when every
// limit allows it: replicas never admit more than a limit together, and their own clocks never matter.
// The admissions of one turn of the event loop go as one call (keygate_rate_limit_batch, migration
// 0006), decided in order in one transaction (the function as migration 0008 replaced it). The
// windows follow the same rule as the in-memory limiter (src/limits/sliding-window.ts). Called only for a verification under a limit. A database that
// cannot answer rejects with StoreUnavailableError, as the key store does.
import type { SQL } from 'bun';
import type { Clock } from '../../core/clock';
import {
  type CountedLimit,
  type LimitState,
  type RateLimiter,
  type RateLimitTicket,
  type RateLimitVerdict,
  verdictOf,
} from '../../limits/rate-limit';
import { sameTurnBatches } from './same-turn-batch';
import { unavailableOr } from './unavailable';

type DecisionRow = {
  counter: string;
  allowed: boolean;
  now_ms: string | number;
  remaining: number;
  reset_ms: string | number;
  next_ms: string | number;
  epoch: string | number | null;
};

export interface PostgresRateLimiter extends RateLimiter {
  check(limits: readonly CountedLimit[]): Promise<RateLimitVerdict>;
  consume(limits: readonly CountedLimit[]): Promise<RateLimitVerdict>;
  consumeKept(limit: CountedLimit): Promise<RateLimitVerdict>;
  refund(limits: readonly CountedLimit[], ticket: RateLimitTicket): Promise<void>;
  forget(counters: readonly string[]): Promise<void>;
  /** Deletes up to `batch` windows that hold nothing any more; how many it deleted. */
  sweep(batch?: number): Promise<number>;
}

/**
 * `clock` replaces the database's clock, for tests that replay arrival times; keygate leaves it out, so
 * the database's clock decides for every replica.
 */
export function createPostgresRateLimiter(sql: SQL, { clock }: { clock?: Clock } = {}): PostgresRateLimiter {
  const argumentsOf = (limits: readonly CountedLimit[]) => ({
    counters: sql.array(
      limits.map((limit) => limit.counter),
      'TEXT',
    ),
    limits: sql.array(
      limits.map((limit) => limit.limit),
      'INT',
    ),
    durations: sql.array(
      limits.map((limit) => limit.duration * 1000),
      'BIGINT',
    ),
  });

  async function decide(limits: readonly CountedLimit[], take: boolean): Promise<RateLimitVerdict> {
    const args = argumentsOf(limits);
    const now = clock === undefined ? null : clock();
    const rows =
      (await sql`SELECT * FROM keygate_rate_limit(${args.counters}, ${args.limits}, ${args.durations}, ${take}, ${now}::bigint)`.catch(
        unavailableOr,
      )) as DecisionRow[];
    return verdictOfRows(limits, rows, take);
  }

  // The admissions of one turn of the event loop: one call, decided in order in one transaction
  // (keygate_rate_limit_batch, migration 0008), each decision seeing the ones before it.
  const consumeInBatch = sameTurnBatches<
    { limits: readonly CountedLimit[]; now: number | null },
    RateLimitVerdict
  >(async (decisions) => {
    const flat = decisions.flatMap((decision, i) =>
      decision.limits.map((limit) => ({ limit, decision: i + 1 })),
    );
    const args = argumentsOf(flat.map((entry) => entry.limit));
    const nows =
      clock === undefined
        ? null
        : sql.array(
            decisions.map((decision) => decision.now),
            'BIGINT',
          );
    const rows = (await sql`SELECT * FROM keygate_rate_limit_batch(${sql.array(
      flat.map((entry) => entry.decision),
      'INT',
    )}, ${args.counters}, ${args.limits}, ${args.durations}, ${nows}::bigint[])`.catch(
      unavailableOr,
    )) as (DecisionRow & { decision: number })[];
    const rowsOf: DecisionRow[][] = decisions.map(() => []);
    for (const row of rows) rowsOf[row.decision - 1]?.push(row);
    return decisions.map((decision, i) => verdictOfRows(decision.limits, rowsOf[i] ?? [], true));
  });

  function verdictOfRows(
    limits: readonly CountedLimit[],
    rows: readonly DecisionRow[],
    take: boolean,
  ): RateLimitVerdict {
    const first = rows[0];
    if (first === undefined) throw new Error('keygate_rate_limit answered no row');
    const states: LimitState[] = rows.map((row, i) => ({
      limit: (limits[i] as CountedLimit).limit,
      duration: (limits[i] as CountedLimit).duration,
      remaining: row.remaining,
      reset: Number(row.reset_ms),
      nextAdmission: Number(row.next_ms),
    }));
    const ticket: RateLimitTicket | undefined =
      take && first.allowed
        ? rows.map((row) => ({ counter: row.counter, epoch: Number(row.epoch) }))
        : undefined;
    return verdictOf(first.allowed, states, Number(first.now_ms), ticket);
  }

  return {
    check: (limits) => decide(limits, false),
    consume: (limits) => consumeInBatch({ limits, now: clock === undefined ? null : clock() }),
    // Nothing to remember here: every decision is the database's.
    consumeKept: (limit) => consumeInBatch({ limits: [limit], now: clock === undefined ? null : clock() }),
    async refund(limits, ticket) {
      const counted = ticket.flatMap(({ counter, epoch }) => {
        const limit = limits.find((candidate) => candidate.counter === counter);
        return limit === undefined ? [] : [{ ...limit, epoch }];
      });
      if (counted.length === 0) return;
      const args = argumentsOf(counted);
      const epochs = sql.array(
        counted.map((limit) => limit.epoch),
        'BIGINT',
      );
      await sql`SELECT keygate_rate_limit_refund(${args.counters}, ${args.limits}, ${args.durations}, ${epochs})`.catch(
        unavailableOr,
      );
    },
    async forget(counters) {
      if (counters.length === 0) return;
      await sql`DELETE FROM rate_limit_windows WHERE counter = ANY(${sql.array([...counters], 'TEXT')})`.catch(
        unavailableOr,
      );
    },
    async sweep(batch = 1000) {
      // SKIP LOCKED: a row a decision holds is busy, not idle; several replicas may sweep at once.
      const deleted = await sql`DELETE FROM rate_limit_windows WHERE counter = ANY(ARRAY(
        SELECT counter FROM rate_limit_windows
        WHERE idle_at <= floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
        LIMIT ${batch} FOR UPDATE SKIP LOCKED)) RETURNING counter`.catch(unavailableOr);
      return deleted.length;
    },
  };
}
