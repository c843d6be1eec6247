// The SQLite ApiKeyStore's own promises: a key is read synchronously, rotation is one transaction, it re-checks the previous key
// inside it, and change events arrive after the commit and before the writer's promise resolves.
import { heapStats } from 'bun:jsc';
import { afterEach, beforeEach, describe, expect, it } from 'bun:test';
import type { ApiKeyRow, ApiKeyStore } from '../../src/apikeys/store';
import { type Db, openDatabase } from '../../src/db/sqlite/open';
import { createSqliteApiKeyStore } from '../../src/db/sqlite/store';
import { id, row } from '../support/rows';

let db: Db;
let store: ApiKeyStore;
beforeEach(() => {
  db = openDatabase(':memory:');
  store = createSqliteApiKeyStore(db);
});
afterEach(async () => {
  await store.drained();
  db.$client.close();
});

describe('findKey', () => {
  it('answers at once, not with a promise (the key cache keeps the row without waiting)', async () => {
    await store.insertKeyWithinLimit(row(id(1)), 10);
    const found = store.findKey(id(1));
    expect(found).not.toBeInstanceOf(Promise);
    expect((found as { id: string }).id).toBe(id(1));
    expect(store.findKey(id(2))).toBeUndefined();
  });

  it('gives each row its secret hash as bytes of its own, no ArrayBuffer the collector must track', async () => {
    const ids = Array.from({ length: 200 }, (_, i) => id(100 + i));
    for (const keyId of ids) await store.insertKeyWithinLimit(row(keyId), 1000);
    const arrayBuffers = () => {
      Bun.gc(true);
      return heapStats().objectTypeCounts.ArrayBuffer ?? 0;
    };
    const before = arrayBuffers();
    const rows = ids.map((keyId) => store.findKey(keyId) as ApiKeyRow);
    // A view on each read's bytes (their `.buffer`) kept one ArrayBuffer object alive per cached row.
    expect(arrayBuffers() - before).toBeLessThan(20);
    expect(
      rows.map((found) => Buffer.from(found.secretHash).equals(Buffer.from(row(found.id).secretHash))),
    ).toEqual(ids.map(() => true));
  });
});

describe('rotateKey', () => {
  it('rolls the previous key’s new expiry back when the insert fails', async () => {
    await store.insertKeyWithinLimit(row(id(1)), 10);
    await store.insertKeyWithinLimit(row(id(2)), 10);
    // The new key's id collides with an existing one: the insert fails after the update ran.
    const rotation = store.rotateKey({
      previousId: id(1),
      previousExpiresAt: 2000,
      next: row(id(2), { createdAt: 2000 }),
      limit: undefined,
    });
    await expect(rotation).rejects.toThrow();
    expect((await store.findKey(id(1)))?.expiresAt).toBe(100_000);
  });

  it('answers not-found for a previous key deleted or expired before the transaction', async () => {
    await store.insertKeyWithinLimit(row(id(1), { expiresAt: 1500 }), 10);
    const next = row(id(9), { createdAt: 2000 });
    expect(
      await store.rotateKey({ previousId: id(1), previousExpiresAt: 2000, next, limit: undefined }),
    ).toBe('not-found');
    expect(
      await store.rotateKey({ previousId: id(2), previousExpiresAt: 2000, next, limit: undefined }),
    ).toBe('not-found');
    expect(await store.findKey(id(9))).toBeUndefined();
  });

  it('counts the cap before shortening the previous key, and changes nothing when it is reached', async () => {
    await store.insertKeyWithinLimit(row(id(1)), 10);
    await store.insertKeyWithinLimit(row(id(2)), 10);
    const next = row(id(9), { createdAt: 2000 });
    expect(await store.rotateKey({ previousId: id(1), previousExpiresAt: 5000, next, limit: 2 })).toBe(
      'limit-reached',
    );
    expect((await store.findKey(id(1)))?.expiresAt).toBe(100_000);
    expect(await store.rotateKey({ previousId: id(1), previousExpiresAt: 5000, next, limit: 3 })).toBe(
      'rotated',
    );
    expect((await store.findKey(id(1)))?.expiresAt).toBe(5000);
    expect(await store.findKey(id(9))).toBeDefined();
  });
});

describe('onKeysChanged', () => {
  it('announces inserted, deleted, rotated and purged ids before the writer’s promise resolves', async () => {
    const events: string[][] = [];
    store.onKeysChanged((ids) => events.push([...(ids as string[])]));
    const seenAtResolve: number[] = [];
    await store.insertKeyWithinLimit(row(id(1)), 10).then(() => seenAtResolve.push(events.length));
    await store.insertKeyWithinLimit(row(id(2), { expiresAt: 1500 }), 10);
    await store
      .rotateKey({ previousId: id(1), previousExpiresAt: 1000, next: row(id(3)), limit: undefined })
      .then(() => seenAtResolve.push(events.length));
    await store.deleteKey(id(3)).then(() => seenAtResolve.push(events.length));
    await store.deleteExpiredBatch(2000, 100).then(() => seenAtResolve.push(events.length));
    expect(events).toEqual([[id(1)], [id(2)], [id(1), id(3)], [id(3)], [id(1), id(2)].sort()]);
    expect(seenAtResolve).toEqual([1, 3, 4, 5]);
  });

  it('announces nothing for writes that changed nothing', async () => {
    const events: string[][] = [];
    store.onKeysChanged((ids) => events.push([...(ids as string[])]));
    await store.insertKeyWithinLimit(row(id(1)), 0);
    await store.deleteKey(id(5));
    await store.deleteExpiredBatch(0, 100);
    expect(events).toEqual([]);
  });
});

describe('listLiveKeys', () => {
  it('is newest first by (createdAt, id) after the given position, live keys at or below the level', async () => {
    await store.insertKeyWithinLimit(row(id(1), { createdAt: 10 }), 100);
    await store.insertKeyWithinLimit(row(id(2), { createdAt: 20 }), 100);
    await store.insertKeyWithinLimit(row(id(3), { createdAt: 20 }), 100);
    await store.insertKeyWithinLimit(row(id(4), { createdAt: 30, level: 5 }), 100);
    await store.insertKeyWithinLimit(row(id(5), { createdAt: 40, expiresAt: 50 }), 100);
    await store.insertKeyWithinLimit(row(id(6), { createdAt: 50, userId: 2 }), 100);
    const ids = async (after?: { createdAt: number; id: string }) =>
      (await store.listLiveKeys({ userId: 1, now: 50, maxLevel: 4, after, limit: 10 })).map((r) => r.id);
    expect(await ids()).toEqual([id(3), id(2), id(1)]);
    expect(await ids({ createdAt: 20, id: id(3) })).toEqual([id(2), id(1)]);
    expect(await ids({ createdAt: 20, id: id(2) })).toEqual([id(1)]);
  });
});

describe('the per-user key counter', () => {
  // What the counter must always equal: the rows each user has in api_keys.
  const counted = () =>
    db.$client
      .query('SELECT user_id AS userId, keys FROM user_key_counts WHERE keys > 0 ORDER BY user_id')
      .all();
  const actual = () =>
    db.$client
      .query('SELECT user_id AS userId, count(*) AS keys FROM api_keys GROUP BY user_id ORDER BY user_id')
      .all();

  it('stays equal to the rows each user holds through creates, deletes, rotations and purges', async () => {
    for (let n = 1; n <= 6; n++) await store.insertKeyWithinLimit(row(id(n), { userId: n % 2 }), 10);
    await store.deleteKey(id(1));
    await store.rotateKey({
      previousId: id(2),
      previousExpiresAt: 1500,
      next: row(id(7), { userId: 0 }),
      limit: 10,
    });
    await store.insertKeyWithinLimit(row(id(8), { userId: 0, expiresAt: 1200 }), 10);
    expect(counted()).toEqual(actual());
    expect(await store.deleteExpiredBatch(1600, 100)).toBe(2); // id(2) rotated away, id(8) expired
    expect(counted()).toEqual(actual());
    expect(counted()).toEqual([
      { userId: 0, keys: 3 },
      { userId: 1, keys: 2 },
    ]);
  });

  it('keeps the cap exact when expired keys not yet purged fill the counter', async () => {
    // Three keys, two of them expired at 2000 and not purged: the counter says 3, the live count 1.
    await store.insertKeyWithinLimit(row(id(1), { expiresAt: 2000 }), 3);
    await store.insertKeyWithinLimit(row(id(2), { expiresAt: 2000 }), 3);
    await store.insertKeyWithinLimit(row(id(3)), 3);
    const at = (n: number) => row(id(n), { createdAt: 3000 });
    expect(await store.insertKeyWithinLimit(at(4), 3)).toBe('inserted');
    expect(await store.insertKeyWithinLimit(at(5), 3)).toBe('inserted');
    expect(await store.insertKeyWithinLimit(at(6), 3)).toBe('limit-reached');
    expect(counted()).toEqual(actual());
  });

  it('a failed job leaves the counter as it was (the insert and its count roll back together)', async () => {
    await store.insertKeyWithinLimit(row(id(1)), 10);
    await expect(store.insertKeyWithinLimit(row(id(1)), 10)).rejects.toThrow();
    expect(counted()).toEqual([{ userId: 1, keys: 1 }]);
  });

  it('keeps the counter in step when one write of a shared commit fails', async () => {
    await store.insertKeyWithinLimit(row(id(1)), 10);
    // Queued in one turn: one commit, in which the second create fails (its id is taken).
    const outcomes = await Promise.allSettled([
      store.insertKeyWithinLimit(row(id(2)), 10),
      store.insertKeyWithinLimit(row(id(1), { userId: 2 }), 10),
      store.deleteKey(id(1)),
      store.insertKeyWithinLimit(row(id(3), { userId: 2 }), 10),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual([
      'fulfilled',
      'rejected',
      'fulfilled',
      'fulfilled',
    ]);
    expect(counted()).toEqual(actual());
    expect(counted()).toEqual([
      { userId: 1, keys: 1 },
      { userId: 2, keys: 1 },
    ]);
  });

  it('counts rows that any other client writes to api_keys, as the triggers on PostgreSQL do', async () => {
    await store.insertKeyWithinLimit(row(id(1)), 10);
    const insert = db.$client.prepare(
      'INSERT INTO api_keys (id, secret_hash, user_id, level, name, created_at, expires_at) VALUES (?, ?, ?, 1, ?, 1000, 100000)',
    );
    for (const n of [2, 3, 4]) insert.run(id(n), new Uint8Array(32), n === 4 ? 7 : 1, `import ${n}`);
    expect(counted()).toEqual(actual());
    db.$client.run(`DELETE FROM api_keys WHERE id IN ('${id(1)}', '${id(4)}')`);
    expect(counted()).toEqual(actual());
    expect(counted()).toEqual([{ userId: 1, keys: 2 }]);
    // A cap of 3: the imported keys count toward it.
    expect(await store.insertKeyWithinLimit(row(id(5)), 3)).toBe('inserted');
    expect(await store.insertKeyWithinLimit(row(id(6)), 3)).toBe('limit-reached');
  });
});
