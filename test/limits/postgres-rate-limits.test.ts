// The PostgreSQL rate limiter, as replicas use it: two pools on one database are two replicas. A burst
// spread over both gets exactly `limit`; a steady overload from both gets between 90 % and 100 %; the
// whole limit is back a duration after the last admission. The database's clock decides and cannot be
// injected, so the overload and the idle test take a few seconds of real time with short durations
// (1-2 s). Runs with KEYGATE_TEST_DATABASE=postgres; plain `bun test` skips it.
import { afterEach, beforeAll, describe, expect, it } from 'bun:test';
import { SQL } from 'bun';
import fc from 'fast-check';
import { StoreUnavailableError } from '../../src/apikeys/store';
import { openPostgres } from '../../src/db/postgres/open';
import { createPostgresRateLimiter, type PostgresRateLimiter } from '../../src/db/postgres/rate-limits';
import { MemoryRateLimiter } from '../../src/limits/memory-rate-limiter';
import type { CountedLimit, RateLimitVerdict } from '../../src/limits/rate-limit';
import { SUB_WINDOWS } from '../../src/limits/sliding-window';
import { freshPostgresDatabase, sharedPostgres, TEST_ENGINE } from '../support/postgres';

const closing: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
});

/** A replica's limiter: its own pool of `size` connections on the (migrated) database. */
async function replica(url: string, size = 4): Promise<PostgresRateLimiter> {
  const db = await openPostgres(url, size);
  closing.push(() => db.$client.close());
  return createPostgresRateLimiter(db.$client);
}

async function twoReplicas() {
  const url = await freshPostgresDatabase();
  return [await replica(url), await replica(url)] as const;
}

describe.skipIf(TEST_ENGINE !== 'postgres')('the PostgreSQL rate limiter', () => {
  // Starting the run's server (initdb, a migrated template) is not any one test's time.
  beforeAll(() => sharedPostgres(), 60_000);

  it('answers remaining, reset and retryAfter, and counts nothing on a check or a refusal', async () => {
    const [limiter] = await twoReplicas();
    const limits = [{ counter: 'k', limit: 3, duration: 60 }];
    const first = await limiter.consume(limits);
    expect(first.allowed).toBe(true);
    expect(first.reported).toMatchObject({ limit: 3, duration: 60, remaining: 2, reset: first.now + 60_000 });
    expect((await limiter.check(limits)).reported.remaining).toBe(2);
    await limiter.consume(limits);
    await limiter.consume(limits);
    const refused = await limiter.consume(limits);
    expect(refused.allowed).toBe(false);
    expect(refused.ticket).toBeUndefined();
    expect(refused.reported.remaining).toBe(0);
    // The first admission frees its slot a minute after it was made.
    expect(refused.retryAfterSeconds).toBe(Math.ceil((first.now + 60_000 - refused.now) / 1000));
    expect(refused.retryAfterSeconds).toBeGreaterThan(55);
    expect((await limiter.check(limits)).reported.remaining).toBe(0);
  });

  it('answers exactly as the in-memory limiter for the same arrivals, on an injected clock', async () => {
    const db = await openPostgres(await freshPostgresDatabase(), 2);
    closing.push(() => db.$client.close());
    // Small limits and durations: windows fill up and empty often, boundaries included.
    const rule = fc.record({
      limit: fc.integer({ min: 1, max: 6 }),
      duration: fc.integer({ min: 1, max: 3 }),
    });
    const step = fc.record({
      // Round gaps too, so arrivals land exactly where a sub-window stops holding.
      gap: fc.oneof(fc.constantFrom(0, 50, 250, 1_000, 2_000), fc.integer({ min: 0, max: 1_500 })),
      action: fc.constantFrom('consume', 'consume', 'consume', 'check', 'consume and refund', 'other rule'),
    });
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        rule,
        fc.option(rule),
        fc.array(step, { minLength: 1, maxLength: 40 }),
        async (own, operator, steps) => {
          const time = { now: 1_700_000_000_000 };
          const memory = new MemoryRateLimiter(() => time.now);
          const postgres = createPostgresRateLimiter(db.$client, { clock: () => time.now });
          run++;
          const limits: CountedLimit[] = [{ counter: `own-${run}`, ...own }];
          if (operator !== null) limits.push({ counter: `operator-${run}`, ...operator });
          for (const { gap, action } of steps) {
            time.now += gap;
            if (action === 'other rule') {
              // A check under another rule changes nothing; a consume under it starts the counter afresh.
              const other = limits.map((limit) => ({ ...limit, limit: limit.limit + 1 }));
              const consumeIt = gap % 2 === 0;
              const expected = consumeIt ? memory.consume(other) : memory.check(other);
              expect(consumeIt ? await postgres.consume(other) : await postgres.check(other)).toEqual(
                expected,
              );
              continue;
            }
            const take = action !== 'check';
            // A single limit is sometimes counted as a key's own, kept limit (consumeKept).
            const kept =
              take && limits.length === 1 && gap % 3 === 0 ? (limits[0] as CountedLimit) : undefined;
            const expected: RateLimitVerdict =
              kept !== undefined
                ? memory.consumeKept(kept)
                : take
                  ? memory.consume(limits)
                  : memory.check(limits);
            const actual =
              kept !== undefined
                ? await postgres.consumeKept(kept)
                : take
                  ? await postgres.consume(limits)
                  : await postgres.check(limits);
            expect(actual).toEqual(expected);
            if (action === 'consume and refund' && expected.ticket !== undefined) {
              memory.refund(limits, expected.ticket);
              await postgres.refund(limits, expected.ticket);
            }
          }
        },
      ),
      { seed: 20261125, numRuns: 150 },
    );
  }, 60_000);

  it('writes no new row version for a refusal', async () => {
    const url = await freshPostgresDatabase();
    const limiter = await replica(url);
    const admin = new SQL(url, { max: 1 });
    closing.push(() => admin.close());
    const version = async () => (await admin`SELECT xmin::text AS v FROM rate_limit_windows`)[0].v;
    const limits = [{ counter: 'k', limit: 1, duration: 60 }];
    await limiter.consume(limits);
    const counted = await version();
    expect((await limiter.consume(limits)).allowed).toBe(false);
    expect(await version()).toBe(counted);
  });

  it('refuses without waiting for the row lock a decision on another replica holds', async () => {
    const url = await freshPostgresDatabase();
    const limiter = await replica(url);
    const limits = [{ counter: 'k', limit: 1, duration: 60 }];
    await limiter.consume(limits);
    const admin = new SQL(url, { max: 1 });
    closing.push(() => admin.close());
    const release = Promise.withResolvers<void>();
    const held = Promise.withResolvers<void>();
    const holding = admin.begin(async (tx) => {
      await tx`SELECT 1 FROM rate_limit_windows WHERE counter = 'k' FOR UPDATE`;
      held.resolve();
      await release.promise;
    });
    await held.promise;
    // The refusal answers while the lock is held; a blocked one would still be waiting after 2 s.
    const refused = await Promise.race([
      limiter.consume(limits),
      Bun.sleep(2_000).then(() => 'blocked' as const),
    ]);
    release.resolve();
    await holding;
    expect(refused).not.toBe('blocked');
    expect(refused).toMatchObject({ allowed: false });
  });

  it('gives a refunded admission back, and starts forgotten or changed counters afresh', async () => {
    const [limiter] = await twoReplicas();
    const limits = [{ counter: 'k', limit: 2, duration: 60 }];
    await limiter.consume(limits);
    const second = await limiter.consume(limits);
    expect(second.reported.remaining).toBe(0);
    await limiter.refund(limits, second.ticket ?? []);
    expect((await limiter.check(limits)).reported.remaining).toBe(1);
    // A refund under another rule than the one counted is ignored.
    await limiter.refund([{ counter: 'k', limit: 9, duration: 60 }], second.ticket ?? []);
    expect((await limiter.check(limits)).reported.remaining).toBe(1);
    await limiter.forget(['k']);
    expect((await limiter.check(limits)).reported.remaining).toBe(2);
    await limiter.consume(limits);
    const changed = [{ counter: 'k', limit: 5, duration: 60 }];
    expect((await limiter.consume(changed)).reported.remaining).toBe(4);
  });

  it('passes a verification only when every limit allows it, and counts it on all or none', async () => {
    const [limiter] = await twoReplicas();
    const own = { counter: 'key', limit: 1, duration: 60 };
    const operator = { counter: 'operator', limit: 100, duration: 60 };
    const first = await limiter.consume([own, operator]);
    expect(first.allowed).toBe(true);
    expect(first.reported).toMatchObject({ limit: 1, remaining: 0 });
    expect((await limiter.consume([own, operator])).allowed).toBe(false);
    expect((await limiter.check([operator])).reported.remaining).toBe(99);
  });

  it('gives a burst of limit + k spread over two replicas exactly limit', async () => {
    const [one, two] = await twoReplicas();
    // Two limits listed in opposite orders by the two replicas: locks in counter order cannot deadlock.
    const own = { counter: 'key', limit: 50, duration: 60 };
    const operator = { counter: 'operator', limit: 1000, duration: 60 };
    const verdicts = await Promise.all(
      Array.from({ length: 90 }, (_, i) =>
        i % 2 === 0 ? one.consume([own, operator]) : two.consume([operator, own]),
      ),
    );
    expect(verdicts.filter((verdict) => verdict.allowed).length).toBe(50);
    expect((await one.check([operator])).reported.remaining).toBe(950);
  });

  it('gives a steady overload from two replicas at least 90 % and at most 100 % of the limit', async () => {
    const [one, two] = await twoReplicas();
    const limit: CountedLimit = { counter: 'k', limit: 40, duration: 2 };
    const d = limit.duration * 1000;
    // About 4 × the limit's rate for 4 s: one verification every 12.5 ms, alternating replicas.
    const verdicts: { allowed: boolean; now: number }[] = [];
    const started = performance.now();
    for (let i = 0; performance.now() - started < 4_000; i++) {
      const verdict = await (i % 2 === 0 ? one : two).consume([limit]);
      verdicts.push({ allowed: verdict.allowed, now: verdict.now });
      await Bun.sleep(Math.max(0, started + (i + 1) * 12.5 - performance.now()));
    }
    const times = verdicts.map((verdict) => verdict.now);
    const T = (times.at(-1) as number) - (times[0] as number);
    const longestGap = Math.max(...times.slice(1).map((at, i) => at - (times[i] as number)));
    const admitted = verdicts.filter((verdict) => verdict.allowed).map((verdict) => verdict.now);
    // At most the limit in every rolling window, so at most limit × (T/duration + 1) over T.
    for (const [i, t] of admitted.entries()) {
      expect(admitted.slice(0, i + 1).filter((earlier) => earlier > t - d).length).toBeLessThanOrEqual(40);
    }
    expect(admitted.length).toBeLessThanOrEqual(40 * (T / d + 1));
    // The floor the algorithm guarantees for the arrivals as they came (docs/rate-limits.md), and 90 %.
    const floor = (40 * (T - longestGap)) / (d + d / SUB_WINDOWS + longestGap);
    expect(admitted.length).toBeGreaterThanOrEqual(Math.floor(floor));
    expect(longestGap).toBeLessThan(100); // else the machine, not the limiter, was too slow to overload it
    expect(admitted.length).toBeGreaterThanOrEqual((0.9 * 40 * T) / d);
  }, 20_000);

  it('has the whole limit back a duration after the last admission, on the database clock', async () => {
    const [one, two] = await twoReplicas();
    const limit = { counter: 'k', limit: 2, duration: 1 };
    await one.consume([limit]);
    const last = await two.consume([limit]);
    expect(last.reported.remaining).toBe(0);
    expect((await one.consume([limit])).allowed).toBe(false);
    // Real time: the database's clock decides.
    await Bun.sleep(last.reported.reset - last.now + 20);
    const back = await two.check([limit]);
    expect(back.reported).toMatchObject({ remaining: 2, reset: back.now });
    expect((await one.consume([limit])).allowed).toBe(true);
    expect((await two.consume([limit])).allowed).toBe(true);
    expect((await one.consume([limit])).allowed).toBe(false);
  });

  it('sweeps windows that hold nothing any more, and only those', async () => {
    const url = await freshPostgresDatabase();
    const limiter = await replica(url);
    await limiter.consume([{ counter: 'short', limit: 5, duration: 1 }]);
    await limiter.consume([{ counter: 'long', limit: 5, duration: 3600 }]);
    await Bun.sleep(1_050);
    expect(await limiter.sweep()).toBe(1);
    const admin = new SQL(url, { max: 1 });
    closing.push(() => admin.close());
    expect(await admin`SELECT counter FROM rate_limit_windows`).toEqual([{ counter: 'long' }]);
  });
});

// Needs no server: nothing listens on the port.
it('rejects with StoreUnavailableError when the database cannot be reached', async () => {
  const sql = new SQL('postgres://postgres@127.0.0.1:1/keygate', { max: 1, connectionTimeout: 2 });
  closing.push(() => sql.close());
  const limiter = createPostgresRateLimiter(sql);
  const limits = [{ counter: 'k', limit: 1, duration: 1 }];
  await expect(limiter.consume(limits)).rejects.toBeInstanceOf(StoreUnavailableError);
  await expect(limiter.check(limits)).rejects.toBeInstanceOf(StoreUnavailableError);
  await expect(limiter.refund(limits, [{ counter: 'k', epoch: 1 }])).rejects.toBeInstanceOf(
    StoreUnavailableError,
  );
  await expect(limiter.forget(['k'])).rejects.toBeInstanceOf(StoreUnavailableError);
});
