// The credits rules and the one statement that applies them: the effective count at any moment (a
// refill sets `amount` every `interval` from the anchor), a take only when `remaining ≥ cost`, and the
// guarded UPDATE doing exactly what the rules say on SQLite (property test against the pure function)
// and PostgreSQL, where concurrent takes from two pools never spend more than was granted.

import { Database } from 'bun:sqlite';
import { afterEach, beforeAll, describe, expect, it } from 'bun:test';
import { SQL } from 'bun';
import { PgDialect } from 'drizzle-orm/pg-core';
import { SQLiteSyncDialect } from 'drizzle-orm/sqlite-core';
import fc from 'fast-check';
import { takeCreditsStatement } from '../../src/db/credits-take';
import { effectiveCredits, nextRefillAt, type StoredCredits, takeCredits } from '../../src/limits/credits';
import { freshPostgresDatabase, sharedPostgres, TEST_ENGINE } from '../support/postgres';

const T0 = 1_700_000_000_000;
const HOUR = 3_600_000;
const refilling = (remaining: number, refilledAt = T0): StoredCredits => ({
  remaining,
  refillAmount: 100,
  refillIntervalMs: HOUR,
  refilledAt,
});
const plain = (remaining: number): StoredCredits => ({
  remaining,
  refillAmount: null,
  refillIntervalMs: null,
  refilledAt: T0,
});

describe('the credits rules', () => {
  const rows: [string, StoredCredits, number, number, number][] = [
    // name, stored, now (ms after T0), effective remaining, anchor (ms after T0)
    ['no refill keeps its count for ever', plain(7), 1_000 * HOUR, 7, 0],
    ['before the first refill', refilling(3), HOUR - 1, 3, 0],
    ['at the refill, remaining is set to amount', refilling(3), HOUR, 100, HOUR],
    ['a refill sets, never adds', refilling(250), HOUR, 100, HOUR],
    ['several missed refills count from the anchor', refilling(0), 5 * HOUR + 17, 100, 5 * HOUR],
    ['an anchor in the future (clock behind) changes nothing', refilling(2, T0 + HOUR), 0, 2, HOUR],
  ];
  it.each(rows)('%s', (_, stored, at, remaining, anchor) => {
    expect(effectiveCredits(stored, T0 + at)).toEqual({ ...stored, remaining, refilledAt: T0 + anchor });
  });

  it('takes cost only when at least cost remain, and says when the next refill comes', () => {
    expect(takeCredits(plain(5), 5, T0)).toEqual({ taken: true, credits: plain(0) });
    expect(takeCredits(plain(4), 5, T0)).toEqual({
      taken: false,
      credits: plain(4),
      nextRefillAt: undefined,
    });
    expect(takeCredits(plain(0), 0, T0)).toEqual({ taken: true, credits: plain(0) });
    expect(takeCredits(refilling(0), 1, T0 + 90 * 60_000)).toEqual({
      taken: true,
      credits: refilling(99, T0 + HOUR),
    });
    expect(takeCredits(refilling(0), 1, T0 + 1)).toEqual({
      taken: false,
      credits: refilling(0),
      nextRefillAt: T0 + HOUR,
    });
    // An amount below the cost refuses even just after a refill; the next one is an interval later.
    expect(takeCredits({ ...refilling(0), refillAmount: 3 }, 5, T0 + HOUR)).toMatchObject({
      taken: false,
      nextRefillAt: T0 + 2 * HOUR,
    });
    expect(nextRefillAt(plain(1), T0)).toBeUndefined();
    expect(nextRefillAt(refilling(1), T0 + 3 * HOUR + 5)).toBe(T0 + 4 * HOUR);
  });
});

describe('lazy refills', () => {
  it('give the same credits whether applied at an earlier moment too or only at the later one', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 1_000 }),
        fc.integer({ min: 1, max: 1_000 }),
        fc.integer({ min: 1, max: 10_000 }),
        fc.integer({ min: 0, max: 100_000 }),
        fc.integer({ min: 0, max: 100_000 }),
        (remaining, amount, interval, first, second) => {
          const stored = { remaining, refillAmount: amount, refillIntervalMs: interval, refilledAt: T0 };
          const early = T0 + Math.min(first, second);
          const late = T0 + Math.max(first, second);
          expect(effectiveCredits(effectiveCredits(stored, early), late)).toEqual(
            effectiveCredits(stored, late),
          );
          // The anchor stays on the refill grid and within one interval of `late`.
          const { refilledAt } = effectiveCredits(stored, late);
          expect((refilledAt - T0) % interval).toBe(0);
          expect(late - refilledAt).toBeLessThan(interval);
        },
      ),
      { seed: 20261125, numRuns: 500 },
    );
  });
});

// ------------------------------------------------------------------ the statement on both engines

const TABLE = `CREATE TABLE credit_pools (
  id text PRIMARY KEY, remaining integer, refill_amount integer, refill_interval_ms bigint,
  refilled_at bigint NOT NULL)`;

type Returned = {
  remaining: number | string;
  refill_amount: number | string | null;
  refill_interval_ms: number | string | null;
  refilled_at: number | string;
};

function sqliteTable() {
  const db = new Database(':memory:');
  db.run(TABLE);
  const dialect = new SQLiteSyncDialect();
  return {
    insert(id: string, c: StoredCredits) {
      db.query('INSERT INTO credit_pools VALUES (?, ?, ?, ?, ?)').run(
        id,
        c.remaining,
        c.refillAmount,
        c.refillIntervalMs,
        c.refilledAt,
      );
    },
    take(id: string, cost: number, now: number): Returned | undefined {
      const query = dialect.sqlToQuery(takeCreditsStatement({ id, cost, now }));
      return db.query(query.sql).get(...(query.params as string[])) as Returned | undefined;
    },
    read(id: string) {
      return db.query('SELECT * FROM credit_pools WHERE id = ?').get(id) as Record<string, number>;
    },
  };
}

const credits = fc.record({
  remaining: fc.integer({ min: 0, max: 20 }),
  refill: fc.option(
    fc.record({ amount: fc.integer({ min: 1, max: 20 }), interval: fc.integer({ min: 1, max: 50 }) }),
  ),
});

describe('the guarded take on SQLite', () => {
  it('does what the rules say, take after take', () => {
    fc.assert(
      fc.property(
        credits,
        fc.array(fc.tuple(fc.integer({ min: 0, max: 40_000 }), fc.integer({ min: 0, max: 8 })), {
          maxLength: 60,
        }),
        ({ remaining, refill }, takes) => {
          const table = sqliteTable();
          let expected: StoredCredits = {
            remaining,
            refillAmount: refill?.amount ?? null,
            refillIntervalMs: refill === null ? null : refill.interval * 1000,
            refilledAt: T0,
          };
          table.insert('k', expected);
          let now = T0;
          for (const [gap, cost] of takes) {
            now += gap;
            const rule = takeCredits(expected, cost, now);
            const row = table.take('k', cost, now);
            if (rule.taken) {
              expected = rule.credits;
              expect(row).toEqual({
                remaining: expected.remaining,
                refill_amount: expected.refillAmount,
                refill_interval_ms: expected.refillIntervalMs,
                refilled_at: expected.refilledAt,
              });
            } else {
              expect(row).toBeNull();
            }
            // A refused take writes nothing: the row is the stored one (its refill still lazily due).
            expect(table.read('k')).toMatchObject({
              remaining: expected.remaining,
              refilled_at: expected.refilledAt,
            });
          }
        },
      ),
      { seed: 20261125, numRuns: 300 },
    );
  });

  it('takes nothing from an unknown key or a key without credits', () => {
    const table = sqliteTable();
    table.insert('none', { ...plain(0), remaining: null as unknown as number });
    expect(table.take('none', 0, T0)).toBeNull();
    expect(table.take('missing', 0, T0)).toBeNull();
  });
});

const closing: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
});

describe.skipIf(TEST_ENGINE !== 'postgres')('the guarded take on PostgreSQL', () => {
  // Starting the run's server (initdb, a migrated template) is not any one test's time.
  beforeAll(() => sharedPostgres(), 60_000);

  async function pool(url: string, max: number) {
    const client = new SQL(url, { max });
    closing.push(() => client.close());
    return client;
  }
  const dialect = new PgDialect();
  const take = async (client: SQL, id: string, cost: number, now: number) => {
    const query = dialect.sqlToQuery(takeCreditsStatement({ id, cost, now }));
    const rows = (await client.unsafe(query.sql, query.params as string[])) as Returned[];
    return rows[0] && { remaining: Number(rows[0].remaining), refilledAt: Number(rows[0].refilled_at) };
  };

  it('does what the rules say', async () => {
    const client = await pool(await freshPostgresDatabase(), 1);
    await client.unsafe(TABLE);
    await client`INSERT INTO credit_pools VALUES ('a', 2, 100, ${HOUR}, ${T0}), ('b', 5, NULL, NULL, ${T0})`;
    expect(await take(client, 'a', 2, T0 + 1)).toEqual({ remaining: 0, refilledAt: T0 });
    expect(await take(client, 'a', 1, T0 + 2)).toBeUndefined();
    // Three intervals later: set to 100 (not added), minus the cost; the anchor on the latest refill.
    expect(await take(client, 'a', 10, T0 + 3 * HOUR + 5)).toEqual({
      remaining: 90,
      refilledAt: T0 + 3 * HOUR,
    });
    expect(await take(client, 'b', 6, T0)).toBeUndefined();
    expect(await take(client, 'b', 0, T0)).toEqual({ remaining: 5, refilledAt: T0 });
    expect(await take(client, 'b', 5, T0 + 100 * HOUR)).toEqual({ remaining: 0, refilledAt: T0 });
    expect(await take(client, 'missing', 0, T0)).toBeUndefined();
  });

  it('never spends more than was granted when two pools take at once', async () => {
    const url = await freshPostgresDatabase();
    const [one, two] = [await pool(url, 8), await pool(url, 8)];
    await one.unsafe(TABLE);
    await one`INSERT INTO credit_pools VALUES ('k', 100, NULL, NULL, ${T0})`;
    const takes = Array.from({ length: 160 }, (_, i) => take(i % 2 === 0 ? one : two, 'k', 1, T0));
    const taken = (await Promise.all(takes)).filter((row) => row !== undefined);
    expect(taken.length).toBe(100);
    expect(taken.map((row) => row.remaining).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 100 }, (_, i) => i),
    );
    const [row] = await one`SELECT remaining FROM credit_pools WHERE id = 'k'`;
    expect(row.remaining).toBe(0);
  });
});
