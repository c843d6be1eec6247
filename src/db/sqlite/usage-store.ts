// The UsageStore on SQLite. A flush is one job of the connection's group-commit writer (shared with
// the key store): every row's upsert and every last_used_at in one transaction, one commit.
import type { UsageRow } from '../../usage/counter';
import type { UsageStore } from '../../usage/store';
import type { GroupCommitWriter } from './group-commit';
import type { Db } from './open';
import { unavailableOr } from './store';

export function createSqliteUsageStore(db: Db, groupCommit: GroupCommitWriter): UsageStore {
  const client = db.$client;
  // Only for ids that name a key: a key deleted since its attempts were counted leaves no row behind.
  const addRow = client.prepare(`
    INSERT INTO key_usage (key_id, bucket, valid, rate_limited, usage_exceeded, denied)
    SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE EXISTS (SELECT 1 FROM api_keys WHERE id = ?1)
    ON CONFLICT (key_id, bucket) DO UPDATE SET
      valid = valid + excluded.valid,
      rate_limited = rate_limited + excluded.rate_limited,
      usage_exceeded = usage_exceeded + excluded.usage_exceeded,
      denied = denied + excluded.denied`);
  // max() of SQLite is NULL when any argument is: coalesce first.
  const markUsed = client.prepare(
    'UPDATE api_keys SET last_used_at = max(coalesce(last_used_at, ?2), ?2) WHERE id = ?1',
  );
  const readRows = client.prepare(`
    SELECT key_id AS keyId, bucket, valid, rate_limited AS rateLimited, usage_exceeded AS usageExceeded, denied
    FROM key_usage WHERE key_id = ?1 AND bucket >= ?2 AND bucket <= ?3 ORDER BY bucket`);
  const readUserRows = client.prepare(`
    SELECT '' AS keyId, u.bucket, sum(u.valid) AS valid, sum(u.rate_limited) AS rateLimited,
      sum(u.usage_exceeded) AS usageExceeded, sum(u.denied) AS denied
    FROM key_usage u JOIN api_keys k ON k.id = u.key_id
    WHERE k.user_id = ?1 AND u.bucket >= ?2 AND u.bucket <= ?3 GROUP BY u.bucket ORDER BY u.bucket`);
  // No portable DELETE ... LIMIT: the batch is picked in a subquery on the bucket index.
  const deleteOld = client.prepare(
    'DELETE FROM key_usage WHERE rowid IN (SELECT rowid FROM key_usage WHERE bucket < ?1 ORDER BY bucket LIMIT ?2)',
  );
  const addVerifications = client.prepare(`
    INSERT INTO verification_counts (bucket, code, count) VALUES (?1, ?2, ?3)
    ON CONFLICT (bucket, code) DO UPDATE SET count = count + excluded.count`);
  // A few rows an hour (one per code; one per hour): removed whole, with the first batch of key rows.
  const deleteOldVerifications = client.prepare('DELETE FROM verification_counts WHERE bucket < ?1');
  const deleteOldCreations = client.prepare('DELETE FROM key_creations WHERE bucket < ?1');

  return {
    writeUsage({ rows, lastUsed, verifications = [] }) {
      if (rows.length === 0 && lastUsed.length === 0 && verifications.length === 0) return Promise.resolve();
      return groupCommit
        .write(() => {
          for (const row of rows) {
            addRow.run(row.keyId, row.bucket, row.valid, row.rateLimited, row.usageExceeded, row.denied);
          }
          for (const { keyId, at } of lastUsed) markUsed.run(keyId, at);
          for (const { bucket, code, count } of verifications) addVerifications.run(bucket, code, count);
        })
        .catch(unavailableOr);
    },

    async readUsage(keyId, from, to) {
      try {
        return readRows.all(keyId, from, to) as UsageRow[];
      } catch (error) {
        unavailableOr(error);
      }
    },

    async readUserUsage(userId, from, to) {
      try {
        return readUserRows.all(userId, from, to) as UsageRow[];
      } catch (error) {
        unavailableOr(error);
      }
    },

    deleteUsageBefore(before, limit) {
      return groupCommit
        .write(() => {
          deleteOldVerifications.run(before);
          deleteOldCreations.run(before);
          return deleteOld.run(before, limit).changes;
        })
        .catch(unavailableOr);
    },
  };
}
