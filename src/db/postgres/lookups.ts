// The LookupStore on PostgreSQL: the operator's queries across every user, on the pool (never on a
// write batch's connection). docs/operator.md has what each costs at a million keys.
import { and, desc, gt, sql } from 'drizzle-orm';
import { firstUsers, type LookupStore, type RankedRow, rankingsOf } from '../../admin/lookup-store';
import { keyWithCreditsOf, withCredits } from '../key-rows';
import type { PostgresDb } from './open';
import { apiKeys, keyCredits } from './schema';
import { unavailableOr } from './unavailable';

// As on SQLite (db/sqlite/lookups.ts): the page's users from user_key_counts (which may name users
// whose keys all expired and are not purged yet, hence the live key asked) and user_policies, each
// read in user order only as far as the page needs, merged; then only those users are described.
const USERS_WITH_KEYS = `
  SELECT user_id FROM user_key_counts c WHERE user_id > $2 AND keys > 0
    AND EXISTS (SELECT 1 FROM api_keys k WHERE k.user_id = c.user_id AND k.expires_at > $1)
  ORDER BY user_id LIMIT $3`;
const USERS_WITH_POLICY = 'SELECT user_id FROM user_policies WHERE user_id > $1 ORDER BY user_id LIMIT $2';
const DESCRIBE_USERS = `
  SELECT u.user_id,
    (SELECT s.subject FROM subjects s WHERE s.user_id = u.user_id) AS subject,
    (SELECT count(*) FROM api_keys k WHERE k.user_id = u.user_id AND k.expires_at > $1) AS keys,
    (SELECT max(k.last_used_at) FROM api_keys k WHERE k.user_id = u.user_id AND k.expires_at > $1) AS last_used_at,
    EXISTS (SELECT 1 FROM user_policies p WHERE p.user_id = u.user_id) AS has_policy
  FROM unnest($2::bigint[]) AS u(user_id) ORDER BY u.user_id`;

// Rows held minus the expired ones not purged yet, in one snapshot.
const COUNT_LIVE = `
  SELECT (SELECT coalesce(sum(keys), 0) FROM user_key_counts)
    - (SELECT count(*) FROM api_keys WHERE expires_at <= $1) AS n`;

const COUNT_CREATED = 'SELECT coalesce(sum(count), 0) AS n FROM key_creations WHERE bucket >= $1';

const VERIFICATIONS = `
  SELECT code, sum(count) AS n FROM verification_counts WHERE bucket >= $1 GROUP BY code`;

// The keys' VALID counts of the hours asked, summed once (materialized) for both rankings. A key's
// usage rows go with the key (same transaction) and are never written for a missing key, so every
// key counted is in api_keys: the ten keys are picked before their join.
const TOP = `
  WITH per_key AS MATERIALIZED (
    SELECT key_id, sum(valid) AS valid FROM key_usage WHERE bucket >= $1 GROUP BY key_id HAVING sum(valid) > 0
  )
  SELECT 'key' AS kind, t.key_id, k.user_id, k.name, t.valid
  FROM (SELECT key_id, valid FROM per_key ORDER BY valid DESC LIMIT $2) t JOIN api_keys k ON k.id = t.key_id
  UNION ALL
  SELECT 'user', NULL, user_id, NULL, valid FROM (
    SELECT k.user_id, sum(p.valid) AS valid FROM per_key p JOIN api_keys k ON k.id = p.key_id
    GROUP BY k.user_id ORDER BY valid DESC LIMIT $2
  ) u`;

const { columns: keyWithCredits, join: creditsOfKey } = keyWithCreditsOf(apiKeys, keyCredits);
/** The LIKE pattern of ids starting with `prefix` (only letters, digits and `_`, which LIKE escapes). */
const likePrefix = (prefix: string) => `${prefix.replaceAll('_', '\\_')}%`;

export function createPostgresLookupStore(db: PostgresDb): LookupStore {
  const client = db.$client;
  // bigint columns and sums come back as strings.
  const query = (text: string, params: unknown[]) =>
    client.unsafe(text, params).catch(unavailableOr) as Promise<Array<Record<string, string | null>>>;
  const number = (value: string | null | undefined) => (value == null ? null : Number(value));

  return {
    async listUsers({ now, afterUserId, limit }) {
      const after = afterUserId ?? -1;
      const [withKeys, withPolicy] = await Promise.all([
        query(USERS_WITH_KEYS, [now, after, limit]),
        query(USERS_WITH_POLICY, [after, limit]),
      ]);
      const userIds = (rows: typeof withKeys) => rows.map((row) => Number(row.user_id));
      const ids = firstUsers(userIds(withKeys), userIds(withPolicy), limit);
      if (ids.length === 0) return [];
      const rows = await query(DESCRIBE_USERS, [now, `{${ids.join(',')}}`]);
      return rows.map((row) => ({
        userId: Number(row.user_id),
        subject: row.subject ?? null,
        keys: Number(row.keys),
        lastUsedAt: number(row.last_used_at),
        hasPolicy: (row.has_policy as unknown) === true,
      }));
    },

    async searchKeys({ now, after, limit, idPrefix, namePart }) {
      const rows = await db
        .select(keyWithCredits)
        .from(apiKeys)
        .leftJoin(keyCredits, creditsOfKey)
        .where(
          and(
            gt(apiKeys.expiresAt, now),
            // On the text_pattern_ops index, whatever the database's collation.
            idPrefix === undefined ? undefined : sql`${apiKeys.id} LIKE ${likePrefix(idPrefix)}`,
            // ASCII letters folded only, as on SQLite (whose lower() folds no other): the same
            // matches on both engines and under any locale.
            namePart === undefined
              ? undefined
              : sql`strpos(translate(${apiKeys.name}, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'), ${namePart}) > 0`,
            after === undefined
              ? undefined
              : sql`(${apiKeys.createdAt}, ${apiKeys.id}) < (${after.createdAt}, ${after.id})`,
          ),
        )
        .orderBy(desc(apiKeys.createdAt), desc(apiKeys.id))
        .limit(limit)
        .catch(unavailableOr);
      return rows.map((joined) =>
        withCredits({ ...joined, secretHash: Buffer.from(joined.secretHash, 'hex') }),
      );
    },

    async countLiveKeys(now) {
      const [row] = await query(COUNT_LIVE, [now]);
      return Number(row?.n ?? 0);
    },

    async countCreatedSince(from) {
      const [row] = await query(COUNT_CREATED, [from]);
      return Number(row?.n ?? 0);
    },

    async verificationsSince(from) {
      const counts: Record<string, number> = {};
      for (const row of await query(VERIFICATIONS, [from])) counts[row.code as string] = Number(row.n);
      return counts;
    },

    async topSince(from, limit) {
      const rows = await query(TOP, [from, limit]);
      return rankingsOf(
        rows.map((row) => ({
          kind: row.kind as RankedRow['kind'],
          key_id: row.key_id ?? null,
          user_id: Number(row.user_id),
          name: row.name ?? null,
          valid: Number(row.valid),
        })),
      );
    },
  };
}
