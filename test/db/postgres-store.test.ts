// The PostgreSQL ApiKeyStore's own promises: the per-user key counter stays in step with api_keys
// whoever writes, the cap is exact when two replicas race for the last key, a database migrated
// before the counter existed gets it backfilled, and every pooled connection commits synchronously
// whatever the server's default. Runs in `bun run test:postgres`; plain `bun test` skips it.
import { afterEach, describe, expect, it } from 'bun:test';
import { SQL } from 'bun';
import type { ApiKeyStore } from '../../src/apikeys/store';
import { RequestGoneError } from '../../src/core/errors';
import { embeddedPostgresMigrations } from '../../src/db/migrations.macro';
import type { CommitBatch } from '../../src/db/postgres/group-commit';
import { migrateUnderLock } from '../../src/db/postgres/migrate';
import { openPostgres } from '../../src/db/postgres/open';
import { createPostgresApiKeyStore } from '../../src/db/postgres/store';
import { freshPostgresDatabase, sharedPostgres, TEST_ENGINE } from '../support/postgres';
import { id, row } from '../support/rows';

const closing: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
});

/** A store on its own pool, as one replica has: two of them on one URL are two replicas. */
async function replica(url: string): Promise<ApiKeyStore> {
  const store = await createPostgresApiKeyStore(await openPostgres(url, 2), { listen: false });
  closing.push(() => store.close());
  return store;
}

function admin(url: string): SQL {
  const sql = new SQL(url, { max: 1 });
  closing.push(() => sql.close());
  return sql;
}

// What the counter must always equal: the rows each user has in api_keys.
const counted = (sql: SQL) =>
  sql`SELECT user_id::int AS "userId", keys FROM user_key_counts WHERE keys <> 0 ORDER BY user_id`;
const actual = (sql: SQL) =>
  sql`SELECT user_id::int AS "userId", count(*)::int AS keys FROM api_keys GROUP BY user_id ORDER BY user_id`;

/** Locks a user's counter row from another connection until `release()`; resolves once it is held. */
async function holdCounterRow(sql: SQL, userId: number) {
  const release = Promise.withResolvers<void>();
  const held = Promise.withResolvers<void>();
  const holding = sql.begin(async (tx) => {
    await tx`SELECT keys FROM user_key_counts WHERE user_id = ${userId} FOR UPDATE`;
    held.resolve();
    await release.promise;
  });
  await held.promise;
  return { release: () => release.resolve(), holding };
}

describe.skipIf(TEST_ENGINE !== 'postgres')('the PostgreSQL store', () => {
  it('keeps the counter equal to the rows each user holds through creates, deletes, rotations and purges', async () => {
    const url = await freshPostgresDatabase();
    const store = await replica(url);
    const sql = admin(url);
    for (let n = 1; n <= 6; n++) await store.insertKeyWithinLimit(row(id(n), { userId: n % 2 }), 10);
    await store.deleteKey(id(1));
    await store.rotateKey({
      previousId: id(2),
      previousExpiresAt: 1500,
      next: row(id(7), { userId: 0 }),
      limit: 10,
    });
    await store.rotateKey({
      previousId: id(3),
      previousExpiresAt: 1000,
      next: row(id(9), { userId: 1 }),
      limit: undefined,
    });
    await store.insertKeyWithinLimit(row(id(8), { userId: 0, expiresAt: 1200 }), 10);
    expect(await counted(sql)).toEqual(await actual(sql));
    expect(await store.deleteExpiredBatch(1600, 100)).toBe(3); // id(2), id(3) rotated away, id(8) expired
    expect(await counted(sql)).toEqual(await actual(sql));
    expect(await counted(sql)).toEqual([
      { userId: 0, keys: 3 },
      { userId: 1, keys: 2 },
    ]);
    // Rows written by another client (an operator's import, an older replica) are counted too.
    await sql`INSERT INTO api_keys (id, secret_hash, user_id, level, name, created_at, expires_at)
      SELECT 'kg_import' || lpad(i::text, 19, '0'), repeat('0', 64), i % 3, 1, 'import', 1000, 100000
      FROM generate_series(1, 30) AS i`;
    expect(await counted(sql)).toEqual(await actual(sql));
    await sql`DELETE FROM api_keys WHERE user_id = 2`;
    expect(await counted(sql)).toEqual(await actual(sql));
  });

  it('keeps the cap exact when expired keys not yet purged fill the counter', async () => {
    const store = await replica(await freshPostgresDatabase());
    await store.insertKeyWithinLimit(row(id(1), { expiresAt: 2000 }), 3);
    await store.insertKeyWithinLimit(row(id(2), { expiresAt: 2000 }), 3);
    await store.insertKeyWithinLimit(row(id(3)), 3);
    const at = (n: number) => row(id(n), { createdAt: 3000 });
    expect(await store.insertKeyWithinLimit(at(4), 3)).toBe('inserted');
    expect(await store.insertKeyWithinLimit(at(5), 3)).toBe('inserted');
    expect(await store.insertKeyWithinLimit(at(6), 3)).toBe('limit-reached');
    const next = row(id(7), { createdAt: 3000 });
    expect(await store.rotateKey({ previousId: id(3), previousExpiresAt: 9000, next, limit: 3 })).toBe(
      'limit-reached',
    );
  });

  it('lets exactly one of two creates racing on two replicas at cap − 1 through', async () => {
    const url = await freshPostgresDatabase();
    const [a, b] = [await replica(url), await replica(url)];
    const limit = 5;
    for (let n = 1; n < limit; n++) await a.insertKeyWithinLimit(row(id(n)), limit);
    // Hold the user's counter row from a third connection, so both creates are in flight and queued
    // on it before either can read the count; then let them go.
    const { release, holding } = await holdCounterRow(admin(url), 1);
    const race = Promise.all([
      a.insertKeyWithinLimit(row(id(101)), limit),
      b.insertKeyWithinLimit(row(id(102)), limit),
    ]);
    const sql = admin(url);
    const waiting = async () =>
      (
        await sql`SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock'`
      )[0].n;
    while ((await waiting()) < 2) await Bun.sleep(10);
    release();
    await holding;
    expect((await race).sort()).toEqual(['inserted', 'limit-reached']);
    expect(await actual(sql)).toEqual([{ userId: 1, keys: limit }]);
    expect(await counted(sql)).toEqual(await actual(sql));
  });

  it('queues one user’s creates in the replica, so they cannot take the pool from other users', async () => {
    const url = await freshPostgresDatabase();
    const store = await replica(url); // a pool of 2
    await store.insertKeyWithinLimit(row(id(1)), 100);
    const { release, holding } = await holdCounterRow(admin(url), 1);
    // Four creates by user 1 wait for its counter row; without the queue two of them would hold both
    // pooled connections while they wait, and user 2's create would wait for them (timeout: fail).
    const blocked = Promise.all([2, 3, 4, 5].map((n) => store.insertKeyWithinLimit(row(id(n)), 100)));
    expect(await store.insertKeyWithinLimit(row(id(6), { userId: 2 }), 100)).toBe('inserted');
    release();
    await holding;
    expect(await blocked).toEqual(['inserted', 'inserted', 'inserted', 'inserted']);
  });

  it('lets creates of one user that share a transaction see each other against the cap', async () => {
    const url = await freshPostgresDatabase();
    const batches: CommitBatch[] = [];
    const store = await createPostgresApiKeyStore(await openPostgres(url, 2), {
      listen: false,
      onCommit: (batch) => batches.push(batch),
    });
    closing.push(() => store.close());
    await store.insertKeyWithinLimit(row(id(1)), 3);
    batches.length = 0;
    const outcomes = await Promise.allSettled([
      store.insertKeyWithinLimit(row(id(2)), 3),
      store.insertKeyWithinLimit(row(id(1)), 3), // the same id again: fails alone
      store.insertKeyWithinLimit(row(id(3)), 3),
      store.insertKeyWithinLimit(row(id(4)), 3),
      store.insertKeyWithinLimit(row(id(5), { userId: 2 }), 3),
    ]);
    expect(outcomes.map((o) => (o.status === 'fulfilled' ? o.value : 'failed'))).toEqual([
      'inserted',
      'failed',
      'inserted',
      'limit-reached', // the fourth of user 1's keys: the two before it in the batch count
      'inserted',
    ]);
    expect(batches.map(({ size, committed }) => ({ size, committed }))).toEqual([
      { size: 5, committed: true },
    ]);
    const sql = admin(url);
    expect(await actual(sql)).toEqual([
      { userId: 1, keys: 3 },
      { userId: 2, keys: 1 },
    ]);
    expect(await counted(sql)).toEqual(await actual(sql));
  });

  it('rolls back a write whose request went away before COMMIT, counter included', async () => {
    const url = await freshPostgresDatabase();
    const store = await replica(url);
    const gone = new AbortController();
    gone.abort();
    const request = new Request('http://localhost/apikeys/jwt', { signal: gone.signal });
    const insert = store.insertKeyWithinLimit(row(id(1)), 10, request.signal);
    await expect(insert).rejects.toBeInstanceOf(RequestGoneError);
    const sql = admin(url);
    expect(await actual(sql)).toEqual([]);
    expect(await counted(sql)).toEqual([]);
  });

  it('backfills the counter of a database migrated before it existed', async () => {
    const { server } = await sharedPostgres();
    const url = server.createDatabase(`keygate_backfill_${process.pid}`);
    const sql = admin(url);
    const [first, ...later] = embeddedPostgresMigrations();
    expect(later.length).toBeGreaterThan(0);
    await migrateUnderLock(sql, [first as (typeof later)[number]]);
    await sql`INSERT INTO api_keys (id, secret_hash, user_id, level, name, created_at, expires_at)
      SELECT 'kg_old' || lpad(i::text, 19, '0'), repeat('0', 64), i % 7, 1, 'old', 1000, 100000 + i
      FROM generate_series(1, 700) AS i`;
    const db = await openPostgres(url, 1);
    await db.$client.close();
    expect(await counted(sql)).toEqual(await actual(sql));
    expect((await counted(sql)).length).toBe(7);
  });
});

describe.skipIf(TEST_ENGINE !== 'postgres')('finding keys by their secret', () => {
  it('finds every key of the given hashes, expired too, by the secret_hash index', async () => {
    const url = await freshPostgresDatabase();
    const store = await replica(url);
    const hashOf = (n: number) => new Uint8Array(32).fill(n);
    await store.insertKeyWithinLimit(row(id(1), { secretHash: hashOf(1) }), 1000);
    await store.insertKeyWithinLimit(row(id(2), { secretHash: hashOf(2), expiresAt: 1001 }), 1000);
    await store.insertKeyWithinLimit(row(id(3), { secretHash: hashOf(3) }), 1000);
    const found = await store.findKeysBySecretHashes([hashOf(1), hashOf(2), hashOf(9)]);
    expect(found.map((key) => key.id).sort()).toEqual([id(1), id(2)]);
    expect(Buffer.from(found.find((key) => key.id === id(1))?.secretHash ?? [])).toEqual(
      Buffer.from(hashOf(1)),
    );
    expect(await store.findKeysBySecretHashes([])).toEqual([]);

    const sql = admin(url);
    await sql`SET enable_seqscan = off`;
    const plan = await sql.unsafe(
      `EXPLAIN SELECT id FROM api_keys WHERE secret_hash = ANY('{${'00'.repeat(32)},${'01'.repeat(32)}}'::text[])`,
    );
    expect(plan.map((line: Record<string, string>) => Object.values(line)[0]).join(' ')).toContain(
      'api_keys_secret_hash',
    );
  });
});
