// The limits' batches on PostgreSQL: the rate-limit decisions and the credit takes of one turn of the
// event loop go as one call, decided in order in one transaction. Two decisions of one key in a batch
// see each other, a pool that runs out midway refuses the rest of the batch, and two replicas batching
// at once stay exact and never deadlock. Runs with KEYGATE_TEST_DATABASE=postgres; plain `bun test`
// skips it.
import { afterEach, beforeAll, describe, expect, it } from 'bun:test';
import type { SQL } from 'bun';
import { batchedCreditsTaker } from '../../src/db/postgres/credits-batch';
import { openPostgres } from '../../src/db/postgres/open';
import { createPostgresRateLimiter } from '../../src/db/postgres/rate-limits';
import { freshPostgresDatabase, sharedPostgres, TEST_ENGINE } from '../support/postgres';

const T0 = 1_700_000_000_000;
const HOUR = 3_600_000;

const closing: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
});

/** A replica's pool of `size` connections on the (migrated) database. */
async function replica(url: string, size = 4): Promise<SQL> {
  const db = await openPostgres(url, size);
  closing.push(() => db.$client.close());
  return db.$client;
}

/** `count` pools on one database, or each on a database of its own. */
async function pools(count: number, separate = false): Promise<SQL[]> {
  const url = await freshPostgresDatabase();
  const opened: SQL[] = [];
  for (let i = 0; i < count; i++)
    opened.push(await replica(separate && i > 0 ? await freshPostgresDatabase() : url));
  return opened;
}

type DecisionRow = { decision: number; counter: string; allowed: boolean; remaining: number };

describe.skipIf(TEST_ENGINE !== 'postgres')('rate-limit decisions in one batch', () => {
  beforeAll(() => sharedPostgres(), 60_000);

  it('decides two decisions of one key in order, the second seeing the first', async () => {
    const [sql] = (await pools(1)) as [SQL];
    const rows = (await sql`SELECT decision, counter, allowed, remaining FROM keygate_rate_limit_batch(
      ${sql.array([1, 2, 3], 'INT')}, ${sql.array(['key:a', 'key:a', 'key:b'], 'TEXT')},
      ${sql.array([1, 1, 1], 'INT')}, ${sql.array([60_000, 60_000, 60_000], 'BIGINT')})`) as DecisionRow[];
    expect(
      rows.map(({ decision, counter, allowed, remaining }) => [decision, counter, allowed, remaining]),
    ).toEqual([
      [1, 'key:a', true, 0],
      [2, 'key:a', false, 0],
      [3, 'key:b', true, 0],
    ]);
  });

  it('counts a decision under two limits on both, and refuses it on both when one is full', async () => {
    const [sql] = (await pools(1)) as [SQL];
    const rows = (await sql`SELECT decision, counter, allowed, remaining FROM keygate_rate_limit_batch(
      ${sql.array([1, 1, 2, 2, 3], 'INT')},
      ${sql.array(['key:a', 'operator:a', 'key:a', 'operator:a', 'operator:a'], 'TEXT')},
      ${sql.array([5, 2, 5, 2, 2], 'INT')}, ${sql.array([60_000, 60_000, 60_000, 60_000, 60_000], 'BIGINT')})`) as DecisionRow[];
    expect(
      rows.map(({ decision, counter, allowed, remaining }) => [decision, counter, allowed, remaining]),
    ).toEqual([
      [1, 'key:a', true, 4],
      [1, 'operator:a', true, 1],
      [2, 'key:a', true, 3],
      [2, 'operator:a', true, 0],
      // The operator's limit is full: refused, and the key's own count did not move either.
      [3, 'operator:a', false, 0],
    ]);
    const [check] = (await sql`SELECT remaining FROM keygate_rate_limit(
      ${sql.array(['key:a'], 'TEXT')}, ${sql.array([5], 'INT')}, ${sql.array([60_000], 'BIGINT')}, false)`) as DecisionRow[];
    expect(check?.remaining).toBe(3);
  });

  it('answers a batch exactly as the same decisions made one call each, rule changes and refusals included', async () => {
    const [batched, single] = (await pools(2, true)) as [SQL, SQL];
    // A fixed pseudo-random sequence (the same every run): 3 keys, small limits, one counter or two,
    // a rule that sometimes changes, the clock moving by 0-900 ms between batches of 1-6 decisions.
    let seed = 7;
    const next = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    let now = T0;
    for (let round = 0; round < 60; round++) {
      now += next(4) * 300;
      const decisions = Array.from({ length: 1 + next(6) }, () => {
        const key = `k${next(3)}`;
        const own = { counter: `key:${key}`, limit: 2 + next(2), duration: 1 };
        return next(3) === 0 ? [own, { counter: `operator:${key}`, limit: 4, duration: 2 }] : [own];
      });
      const flat = decisions.flatMap((limits, d) => limits.map((limit) => ({ ...limit, d: d + 1 })));
      const got =
        (await batched`SELECT decision, counter, allowed, now_ms, remaining, reset_ms, next_ms, epoch
        FROM keygate_rate_limit_batch(${batched.array(
          flat.map((f) => f.d),
          'INT',
        )}, ${batched.array(
          flat.map((f) => f.counter),
          'TEXT',
        )}, ${batched.array(
          flat.map((f) => f.limit),
          'INT',
        )}, ${batched.array(
          flat.map((f) => f.duration * 1000),
          'BIGINT',
        )}, ${batched.array(
          decisions.map(() => now),
          'BIGINT',
        )})`) as Record<string, unknown>[];
      const expected: Record<string, unknown>[] = [];
      for (const [d, limits] of decisions.entries()) {
        const rows =
          await single`SELECT counter, allowed, now_ms, remaining, reset_ms, next_ms, epoch FROM keygate_rate_limit(
          ${single.array(
            limits.map((l) => l.counter),
            'TEXT',
          )}, ${single.array(
            limits.map((l) => l.limit),
            'INT',
          )}, ${single.array(
            limits.map((l) => l.duration * 1000),
            'BIGINT',
          )}, true, ${now}::bigint)`;
        for (const row of rows) expected.push({ decision: d + 1, ...row });
      }
      expect(got).toEqual(expected);
    }
  });

  it('keeps the admissions of a shared counter made before a refused decision of the batch', async () => {
    const [batched, single] = (await pools(2, true)) as [SQL, SQL];
    // The user's limit 3 is shared by key f (no limit of its own) and key e, whose own limit of 1
    // is used up: e's decisions are refused, and f's on either side of them share user:u.
    for (const sql of [batched, single])
      await sql`SELECT * FROM keygate_rate_limit(${sql.array(['key:e'], 'TEXT')}, ${sql.array([1], 'INT')},
        ${sql.array([60_000], 'BIGINT')}, true, ${T0}::bigint)`;
    const f = [{ counter: 'user:u', limit: 3 }];
    const e = [
      { counter: 'key:e', limit: 1 },
      { counter: 'user:u', limit: 3 },
    ];
    const decisions = [f, e, f, e, f];
    const flat = decisions.flatMap((limits, d) => limits.map((limit) => ({ ...limit, d: d + 1 })));
    const admitted: boolean[][] = [];
    for (let call = 0; call < 4; call++) {
      const rows = (await batched`SELECT decision, counter, allowed, remaining FROM keygate_rate_limit_batch(
        ${batched.array(
          flat.map((entry) => entry.d),
          'INT',
        )}, ${batched.array(
          flat.map((entry) => entry.counter),
          'TEXT',
        )}, ${batched.array(
          flat.map((entry) => entry.limit),
          'INT',
        )}, ${batched.array(
          flat.map(() => 60_000),
          'BIGINT',
        )}, ${batched.array(
          decisions.map(() => T0 + 1000 * (call + 1)),
          'BIGINT',
        )})`) as DecisionRow[];
      admitted.push(rows.filter((row) => row.counter === 'user:u').map((row) => row.allowed));
      // The same decisions one call each give the same answers.
      const expected: boolean[] = [];
      for (const limits of decisions) {
        const [first] = (await single`SELECT allowed FROM keygate_rate_limit(${single.array(
          limits.map((limit) => limit.counter),
          'TEXT',
        )}, ${single.array(
          limits.map((limit) => limit.limit),
          'INT',
        )}, ${single.array(
          limits.map(() => 60_000),
          'BIGINT',
        )}, true, ${T0 + 1000 * (call + 1)}::bigint)`) as DecisionRow[];
        expected.push(first?.allowed ?? false);
      }
      expect(admitted[call]).toEqual(expected);
    }
    // Four calls of F, E, F, E, F against a user limit of 3: 3 admissions in all, not 3 per call.
    expect(admitted).toEqual([
      [true, false, true, false, true],
      [false, false, false, false, false],
      [false, false, false, false, false],
      [false, false, false, false, false],
    ]);
    const [stored] =
      (await batched`SELECT remaining FROM keygate_rate_limit(${batched.array(['user:u'], 'TEXT')},
      ${batched.array([3], 'INT')}, ${batched.array([60_000], 'BIGINT')}, false, ${T0 + 5000}::bigint)`) as DecisionRow[];
    expect(stored?.remaining).toBe(0);
  });

  it("gives the limiter's admissions of one turn their answers in order", async () => {
    const [sql] = (await pools(1)) as [SQL];
    const limiter = createPostgresRateLimiter(sql);
    const limits = [{ counter: 'key:k', limit: 3, duration: 60 }];
    // Asked in the same turn of the event loop: one batch.
    const verdicts = await Promise.all(Array.from({ length: 5 }, () => limiter.consume(limits)));
    expect(verdicts.map((verdict) => [verdict.allowed, verdict.reported.remaining])).toEqual([
      [true, 2],
      [true, 1],
      [true, 0],
      [false, 0],
      [false, 0],
    ]);
    expect(verdicts.slice(0, 3).every((verdict) => verdict.ticket !== undefined)).toBe(true);
    expect(verdicts.slice(3).every((verdict) => verdict.ticket === undefined)).toBe(true);
  });

  it('never admits more than the limit from two replicas batching at once, and never deadlocks', async () => {
    const [one, two] = (await pools(2)) as [SQL, SQL];
    const limiters = [createPostgresRateLimiter(one), createPostgresRateLimiter(two)];
    // Every decision is under the same two counters, named in opposite orders on the two replicas.
    const limitsOf = (i: number) => {
      const both = [
        { counter: 'key:x', limit: 70, duration: 60 },
        { counter: 'operator:x', limit: 1000, duration: 60 },
      ];
      return i % 2 === 0 ? both : both.reverse();
    };
    const verdicts = await Promise.all(
      Array.from({ length: 200 }, (_, i) => (limiters[i % 2] as (typeof limiters)[0]).consume(limitsOf(i))),
    );
    expect(verdicts.filter((verdict) => verdict.allowed).length).toBe(70);
  });
});

describe.skipIf(TEST_ENGINE !== 'postgres')('credit takes in one batch', () => {
  beforeAll(() => sharedPostgres(), 60_000);

  const credits = (
    sql: SQL,
    lineage: string,
    remaining: number,
    refill?: { amount: number; intervalMs: number },
  ) =>
    sql`INSERT INTO key_credits (lineage, remaining, refill_amount, refill_interval_ms, refilled_at)
      VALUES (${lineage}, ${remaining}, ${refill?.amount ?? null}, ${refill?.intervalMs ?? null}, ${T0})`;

  it('takes in order, and refuses the rest of the batch once a pool runs out midway', async () => {
    const [sql] = (await pools(1)) as [SQL];
    await credits(sql, 'a', 2);
    await credits(sql, 'b', 10);
    const take = batchedCreditsTaker(sql);
    const outcomes = await Promise.all([
      take('a', 1, T0),
      take('b', 4, T0),
      take('a', 1, T0),
      take('a', 1, T0),
      take('b', 7, T0),
      take('a', 0, T0),
      take('none', 1, T0),
    ]);
    expect(outcomes.map((outcome) => outcome && [outcome.taken, outcome.credits.remaining])).toEqual([
      [true, 1],
      [true, 6],
      [true, 0],
      [false, 0],
      // Short by one: nothing taken, and the pool is as the earlier take of the batch left it.
      [false, 6],
      [true, 0],
      undefined,
    ]);
    const rows = await sql`SELECT lineage, remaining FROM key_credits ORDER BY lineage`;
    expect(rows.map((row: { remaining: string }) => Number(row.remaining))).toEqual([0, 6]);
  });

  it('applies a due refill in the take, and says when the next one comes on a refusal', async () => {
    const [sql] = (await pools(1)) as [SQL];
    await credits(sql, 'r', 1, { amount: 3, intervalMs: HOUR });
    const take = batchedCreditsTaker(sql);
    const [first, second, afterRefill, last, refused] = await Promise.all([
      take('r', 1, T0 + 1),
      take('r', 1, T0 + 2),
      take('r', 2, T0 + 2 * HOUR + 7),
      take('r', 1, T0 + 2 * HOUR + 8),
      take('r', 1, T0 + 2 * HOUR + 9),
    ]);
    expect(first).toMatchObject({ taken: true, credits: { remaining: 0, refilledAt: T0 } });
    expect(second).toMatchObject({ taken: false, nextRefillAt: T0 + HOUR });
    // Set to 3 (not added to), minus 2; the anchor on the latest refill.
    expect(afterRefill).toMatchObject({ taken: true, credits: { remaining: 1, refilledAt: T0 + 2 * HOUR } });
    expect(last).toMatchObject({ taken: true, credits: { remaining: 0 } });
    expect(refused).toMatchObject({ taken: false, nextRefillAt: T0 + 3 * HOUR });
  });

  it('never spends more than was granted from two replicas batching at once, and never deadlocks', async () => {
    const [one, two] = (await pools(2)) as [SQL, SQL];
    await credits(one, 'x', 100);
    await credits(one, 'y', 100);
    const takers = [batchedCreditsTaker(one), batchedCreditsTaker(two)];
    // Both pools in every batch, in opposite orders on the two replicas.
    const takes = Array.from({ length: 300 }, (_, i) => {
      const take = takers[i % 2] as (typeof takers)[0];
      const pool = i % 4 < 2 === (i % 2 === 0) ? 'x' : 'y';
      return take(pool, 1, T0);
    });
    const outcomes = await Promise.all(takes);
    expect(outcomes.filter((outcome) => outcome?.taken).length).toBe(200);
    const rows = await one`SELECT remaining FROM key_credits ORDER BY lineage`;
    expect(rows.map((row: { remaining: string }) => Number(row.remaining))).toEqual([0, 0]);
  });
});
