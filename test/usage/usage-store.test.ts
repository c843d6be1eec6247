// The UsageStore on both engines (KEYGATE_TEST_DATABASE=postgres for PostgreSQL): a flush is one
// write for every key, adds to what is stored (two replicas' counts add up), keeps the later last
// use, stores nothing for an id that names no key; a key's rows go with the key (delete, purge);
// retention removes old rows in batches.

import { afterEach, beforeAll, describe, expect, it } from 'bun:test';
import { openStore } from '../../src/keygate';
import { HOUR_MS, type UsageRow } from '../../src/usage/counter';
import { freshPostgresDatabase, sharedPostgres, TEST_ENGINE } from '../support/postgres';
import { rawQuery } from '../support/raw-query';
import { id, row } from '../support/rows';

// The run's PostgreSQL server starts once, before the first test's clock runs.
beforeAll(async () => {
  if (TEST_ENGINE === 'postgres') await sharedPostgres();
}, 120_000);

const closing: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
});

const H = Date.parse('2026-11-22T10:00:00.000Z');

async function opened(url?: string) {
  const databaseUrl = url ?? (TEST_ENGINE === 'postgres' ? await freshPostgresDatabase() : ':memory:');
  // Every transaction that reaches the database: SQLite's group commits, PostgreSQL's transactions.
  const writes = { count: 0 };
  const store = await openStore(
    {
      database: databaseUrl.startsWith('postgres')
        ? { engine: 'postgres', url: databaseUrl, redacted: 'postgres' }
        : { engine: 'sqlite', path: databaseUrl },
      databasePoolSize: 2,
    },
    {
      serving: false,
      onCommit: (batch) => {
        if (batch.committed) writes.count++;
      },
      onWrite: (committed) => {
        if (committed) writes.count++;
      },
    },
  );
  closing.push(() => store.store.close());
  const raw = (query: string, params: unknown[] = []) => rawQuery(store, query, params);
  return { ...store, rawQuery: raw, writes, databaseUrl };
}

const usageRow = (keyId: string, bucket: number, counts: Partial<UsageRow> = {}): UsageRow => ({
  keyId,
  bucket,
  valid: 0,
  rateLimited: 0,
  usageExceeded: 0,
  denied: 0,
  ...counts,
});

async function storedRows(rawQuery: (query: string) => Promise<Record<string, unknown>[]>) {
  const rows = await rawQuery(
    'SELECT key_id, bucket, valid, rate_limited, usage_exceeded, denied FROM key_usage ORDER BY key_id, bucket',
  );
  return rows.map((r) => [r.key_id, Number(r.bucket), Number(r.valid), Number(r.denied)]);
}

async function lastUsedOf(
  rawQuery: (query: string, params: unknown[]) => Promise<Record<string, unknown>[]>,
  key: string,
) {
  const [found] = await rawQuery('SELECT last_used_at FROM api_keys WHERE id = $1', [key]);
  return found?.last_used_at === null ? null : Number(found?.last_used_at);
}

describe(`the usage store (${TEST_ENGINE})`, () => {
  it('writes a flush of 200 keys and their last use in one transaction', async () => {
    const { store, usage, writes, rawQuery } = await opened();
    for (let n = 1; n <= 200; n++) await store.insertKeyWithinLimit(row(id(n)), 1000);
    const before = writes.count;
    const rows = Array.from({ length: 200 }, (_, n) => usageRow(id(n + 1), H, { valid: n + 1 }));
    const lastUsed = rows.map((r) => ({ keyId: r.keyId, at: H + 5 }));
    await usage.writeUsage({ rows, lastUsed });
    expect(writes.count - before).toBe(1);
    const [{ n, total }] = (await rawQuery('SELECT count(*) AS n, sum(valid) AS total FROM key_usage')) as [
      { n: unknown; total: unknown },
    ];
    expect([Number(n), Number(total)]).toEqual([200, (200 * 201) / 2]);
    expect(await lastUsedOf(rawQuery, id(200))).toBe(H + 5);
  });

  it('adds to the stored hour, so two replicas’ flushes add up, and keeps the later last use', async () => {
    const first = await opened();
    await first.store.insertKeyWithinLimit(row(id(1)), 10);
    await first.usage.writeUsage({
      rows: [usageRow(id(1), H, { valid: 3, denied: 1 })],
      lastUsed: [{ keyId: id(1), at: H + 2000 }],
    });
    // A second replica on the same database (PostgreSQL), or the same SQLite connection again.
    const second = TEST_ENGINE === 'postgres' ? await opened(first.databaseUrl) : first;
    await second.usage.writeUsage({
      rows: [usageRow(id(1), H, { valid: 2 }), usageRow(id(1), H + HOUR_MS, { denied: 4 })],
      lastUsed: [{ keyId: id(1), at: H + 1000 }],
    });
    expect(await storedRows(first.rawQuery)).toEqual([
      [id(1), H, 5, 1],
      [id(1), H + HOUR_MS, 0, 4],
    ]);
    expect(await lastUsedOf(first.rawQuery, id(1))).toBe(H + 2000);
  });

  it('stores no row and no last use for an id that names no key', async () => {
    const { store, usage, rawQuery } = await opened();
    await store.insertKeyWithinLimit(row(id(1)), 10);
    await usage.writeUsage({
      rows: [usageRow(id(1), H, { valid: 1 }), usageRow(id(2), H, { denied: 1 })],
      lastUsed: [{ keyId: id(2), at: H }],
    });
    expect(await storedRows(rawQuery)).toEqual([[id(1), H, 1, 0]]);
  });

  it('reads a key’s hours between two instants, both included, ascending', async () => {
    const { store, usage } = await opened();
    await store.insertKeyWithinLimit(row(id(1)), 10);
    await store.insertKeyWithinLimit(row(id(2)), 10);
    await usage.writeUsage({
      rows: [0, 1, 2, 3].flatMap((h) => [
        usageRow(id(1), H + h * HOUR_MS, { valid: h + 1 }),
        usageRow(id(2), H + h * HOUR_MS, { valid: 9 }),
      ]),
      lastUsed: [],
    });
    const read = await usage.readUsage(id(1), H + HOUR_MS, H + 2 * HOUR_MS);
    expect(read).toEqual([
      usageRow(id(1), H + HOUR_MS, { valid: 2 }),
      usageRow(id(1), H + 2 * HOUR_MS, { valid: 3 }),
    ]);
  });

  it('removes a key’s rows with the key: delete, and the purge of expired keys', async () => {
    const { store, usage, rawQuery } = await opened();
    await store.insertKeyWithinLimit(row(id(1)), 10);
    await store.insertKeyWithinLimit(row(id(2), { expiresAt: 5000 }), 10);
    await store.insertKeyWithinLimit(row(id(3)), 10);
    await usage.writeUsage({
      rows: [1, 2, 3].map((n) => usageRow(id(n), H, { valid: 1 })),
      lastUsed: [],
    });
    expect(await store.deleteKey(id(1))).toBe(true);
    expect(await store.deleteExpiredBatch(5000, 10)).toBe(1);
    expect(await storedRows(rawQuery)).toEqual([[id(3), H, 1, 0]]);
  });

  it('removes rows older than a moment in batches of the size asked', async () => {
    const { store, usage, rawQuery } = await opened();
    await store.insertKeyWithinLimit(row(id(1)), 10);
    await usage.writeUsage({
      rows: [0, 1, 2, 3, 4].map((h) => usageRow(id(1), H + h * HOUR_MS, { valid: 1 })),
      lastUsed: [],
    });
    expect(await usage.deleteUsageBefore(H + 3 * HOUR_MS, 2)).toBe(2);
    expect(await usage.deleteUsageBefore(H + 3 * HOUR_MS, 2)).toBe(1);
    expect(await usage.deleteUsageBefore(H + 3 * HOUR_MS, 2)).toBe(0);
    expect((await storedRows(rawQuery)).map((r) => r[1])).toEqual([H + 3 * HOUR_MS, H + 4 * HOUR_MS]);
  });
});
