// Storage of API keys: rows in, rows out, no rules. Writes go through the group-commit writer and
// resolve once committed; reads are synchronous prepared statements.
import { and, count, eq, gt, inArray, lte, sql } from 'drizzle-orm';
import { type CommitBatch, GroupCommitWriter } from '../db/group-commit';
import type { Db } from '../db/open';
import { type ApiKeyRow, apiKeys } from '../db/schema';

export type ApiKeyStore = ReturnType<typeof createApiKeyStore>;

export function createApiKeyStore(db: Db, options: { onCommit?: (batch: CommitBatch) => void } = {}) {
  const writer = new GroupCommitWriter(db.$client, options.onCommit);

  const findById = db
    .select()
    .from(apiKeys)
    .where(eq(apiKeys.id, sql.placeholder('id')))
    .prepare();

  const countLive = db
    .select({ n: count() })
    .from(apiKeys)
    .where(and(eq(apiKeys.userId, sql.placeholder('userId')), gt(apiKeys.expiresAt, sql.placeholder('now'))))
    .prepare();

  const insert = db
    .insert(apiKeys)
    .values({
      id: sql.placeholder('id'),
      secretHash: sql.placeholder('secretHash'),
      userId: sql.placeholder('userId'),
      level: sql.placeholder('level'),
      name: sql.placeholder('name'),
      createdAt: sql.placeholder('createdAt'),
      expiresAt: sql.placeholder('expiresAt'),
    })
    .prepare();

  const deleteById = db
    .delete(apiKeys)
    .where(eq(apiKeys.id, sql.placeholder('id')))
    .returning({ id: apiKeys.id })
    .prepare();

  // SQLite has no portable DELETE ... LIMIT: pick the batch in a subquery on the expires_at index.
  const deleteExpired = db
    .delete(apiKeys)
    .where(
      inArray(
        apiKeys.id,
        db
          .select({ id: apiKeys.id })
          .from(apiKeys)
          .where(lte(apiKeys.expiresAt, sql.placeholder('now')))
          .orderBy(apiKeys.expiresAt)
          .limit(sql.placeholder('limit')),
      ),
    )
    .returning({ id: apiKeys.id })
    .prepare();

  return {
    findKey(id: string): ApiKeyRow | undefined {
      return findById.get({ id });
    },

    /** Inserts unless the user already holds `limit` live keys; the count and the insert share one transaction. */
    insertKeyWithinLimit(row: ApiKeyRow, limit: number): Promise<'inserted' | 'limit-reached'> {
      return writer.write(() => {
        if ((countLive.get({ userId: row.userId, now: row.createdAt })?.n ?? 0) >= limit)
          return 'limit-reached';
        insert.run(row);
        return 'inserted';
      });
    },

    /** Resolves true when the key existed and its removal is committed. */
    deleteKey(id: string): Promise<boolean> {
      return writer.write(() => deleteById.all({ id }).length > 0);
    },

    /** Deletes up to `limit` keys that expired at or before `now`; resolves with how many. */
    deleteExpiredBatch(now: number, limit: number): Promise<number> {
      return writer.write(() => deleteExpired.all({ now, limit }).length);
    },

    /** Every queued write committed or rejected. */
    drained: () => writer.drained(),

    ping(): boolean {
      return db.$client.query('SELECT 1 AS ok').get() !== null;
    },
  };
}
