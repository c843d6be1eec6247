// The UsageStore on PostgreSQL, for any number of replicas: each flush is one transaction, whose
// multi-row upsert adds this replica's counts to whatever the others wrote (so they add up), and
// whose last_used_at update keeps the later of the two times.
import type { UsageRow } from '../../usage/counter';
import type { UsageStore } from '../../usage/store';
import type { PostgresDb } from './open';
import { unavailableCode, unavailableOr } from './unavailable';

// First the keys of the batch are locked, in id order, against a delete: a key deleted before the
// lock is not returned (its rows are skipped), one deleted after waits for this commit and then
// removes the rows it wrote. Two replicas flushing the same keys take the locks in the same order
// and insert in the same (key_id, bucket) order, so they queue rather than deadlock; the locks are
// taken at their final strength at once (no upgrade from a weaker one, which can deadlock too).
const LOCK_KEYS = 'SELECT id FROM api_keys WHERE id = ANY($1::text[]) ORDER BY id FOR NO KEY UPDATE';

const MARK_USED = `
  UPDATE api_keys AS k SET last_used_at = GREATEST(k.last_used_at, u.at)
  FROM unnest($1::text[], $2::bigint[]) AS u(id, at) WHERE k.id = u.id`;

const ADD_ROWS = `
  INSERT INTO key_usage (key_id, bucket, valid, rate_limited, usage_exceeded, denied)
  SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[])
  ORDER BY 1, 2
  ON CONFLICT (key_id, bucket) DO UPDATE SET
    valid = key_usage.valid + EXCLUDED.valid,
    rate_limited = key_usage.rate_limited + EXCLUDED.rate_limited,
    usage_exceeded = key_usage.usage_exceeded + EXCLUDED.usage_exceeded,
    denied = key_usage.denied + EXCLUDED.denied`;

// In (bucket, code) order, as every replica's flush: two of them queue on a row rather than deadlock.
const ADD_VERIFICATIONS = `
  INSERT INTO verification_counts (bucket, code, count)
  SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[]) ORDER BY 1, 2
  ON CONFLICT (bucket, code) DO UPDATE SET count = verification_counts.count + EXCLUDED.count`;

const READ_ROWS = `
  SELECT key_id, bucket, valid, rate_limited, usage_exceeded, denied FROM key_usage
  WHERE key_id = $1 AND bucket >= $2 AND bucket <= $3 ORDER BY bucket`;

const READ_USER_ROWS = `
  SELECT '' AS key_id, u.bucket, sum(u.valid) AS valid, sum(u.rate_limited) AS rate_limited,
    sum(u.usage_exceeded) AS usage_exceeded, sum(u.denied) AS denied
  FROM key_usage u JOIN api_keys k ON k.id = u.key_id
  WHERE k.user_id = $1 AND u.bucket >= $2 AND u.bucket <= $3 GROUP BY u.bucket ORDER BY u.bucket`;

// SKIP LOCKED: replicas removing old rows at the same time take different ones, and wait on none.
const DELETE_OLD = `
  DELETE FROM key_usage WHERE (key_id, bucket) IN (
    SELECT key_id, bucket FROM key_usage WHERE bucket < $1 ORDER BY bucket LIMIT $2 FOR UPDATE SKIP LOCKED)`;

export function createPostgresUsageStore(
  db: PostgresDb,
  {
    onWrite,
  }: {
    /** Told after each write transaction: committed, or refused because the database is unavailable. */
    onWrite?: (committed: boolean) => void;
  } = {},
): UsageStore {
  const client = db.$client;
  /** One transaction; no synchronous_commit of its own: no answer waits on these counts. */
  const transaction = <T>(work: (tx: typeof client) => Promise<T>): Promise<T> =>
    client
      .begin((tx) => work(tx as unknown as typeof client))
      .then(
        (value) => {
          onWrite?.(true);
          return value as T;
        },
        (error: unknown) => {
          if (unavailableCode(error) !== undefined) onWrite?.(false);
          return unavailableOr(error);
        },
      );

  return {
    async writeUsage({ rows, lastUsed, verifications = [] }) {
      if (rows.length === 0 && lastUsed.length === 0 && verifications.length === 0) return;
      const ids = [...new Set([...rows.map((row) => row.keyId), ...lastUsed.map((use) => use.keyId)])];
      await transaction(async (tx) => {
        if (verifications.length > 0) {
          await tx.unsafe(ADD_VERIFICATIONS, [
            verifications.map((count) => count.bucket),
            verifications.map((count) => count.code),
            verifications.map((count) => count.count),
          ]);
        }
        if (ids.length === 0) return;
        const locked = await tx.unsafe(LOCK_KEYS, [ids]);
        const existing = new Set(locked.map((row: { id: string }) => row.id));
        const used = lastUsed.filter((use) => existing.has(use.keyId));
        if (used.length > 0) {
          await tx.unsafe(MARK_USED, [used.map((use) => use.keyId), used.map((use) => use.at)]);
        }
        const kept = rows.filter((row) => existing.has(row.keyId));
        if (kept.length > 0) {
          await tx.unsafe(ADD_ROWS, [
            kept.map((row) => row.keyId),
            kept.map((row) => row.bucket),
            kept.map((row) => row.valid),
            kept.map((row) => row.rateLimited),
            kept.map((row) => row.usageExceeded),
            kept.map((row) => row.denied),
          ]);
        }
      });
    },

    async readUsage(keyId, from, to) {
      return (await client.unsafe(READ_ROWS, [keyId, from, to]).catch(unavailableOr)).map(usageRowOf);
    },

    async readUserUsage(userId, from, to) {
      return (await client.unsafe(READ_USER_ROWS, [userId, from, to]).catch(unavailableOr)).map(usageRowOf);
    },

    async deleteUsageBefore(before, limit) {
      return transaction(async (tx) => {
        // A few rows an hour (one per code; one per hour and shard): removed whole.
        await tx.unsafe('DELETE FROM verification_counts WHERE bucket < $1', [before]);
        await tx.unsafe('DELETE FROM key_creations WHERE bucket < $1', [before]);
        return (await tx.unsafe(DELETE_OLD, [before, limit])).count as number;
      });
    },
  };
}

/** A row as read: bigint columns (and sums) come back as strings. */
function usageRowOf(row: Record<string, string>): UsageRow {
  return {
    keyId: row.key_id as string,
    bucket: Number(row.bucket),
    valid: Number(row.valid),
    rateLimited: Number(row.rate_limited),
    usageExceeded: Number(row.usage_exceeded),
    denied: Number(row.denied),
  };
}
