// The LookupStore on SQLite: the operator's queries across every user, read on the connection's own
// prepared statements (they never wait for the writer). docs/operator.md has what each costs at a
// million keys.
import { and, desc, gt, sql } from 'drizzle-orm';
import {
  firstUsers,
  type LookupStore,
  type RankedRow,
  rankingsOf,
  type UserRow,
} from '../../admin/lookup-store';
import { keyWithCreditsOf, withCredits } from '../key-rows';
import type { Db } from './open';
import { apiKeys, keyCredits } from './schema';
import { unavailableOr } from './store';

// A user holds live keys or a policy. The page's users come in user order from two primary keys,
// each read only as far as the page needs: user_key_counts (kept by triggers; it may name users whose
// keys all expired and are not purged yet, hence the live key asked of the per-user index) and
// user_policies; the two are merged, then only the page's users are described.
const USERS_WITH_KEYS = `
  SELECT user_id AS userId FROM user_key_counts c WHERE user_id > ?2 AND keys > 0
    AND EXISTS (SELECT 1 FROM api_keys k WHERE k.user_id = c.user_id AND k.expires_at > ?1)
  ORDER BY user_id LIMIT ?3`;
const USERS_WITH_POLICY =
  'SELECT user_id AS userId FROM user_policies WHERE user_id > ?1 ORDER BY user_id LIMIT ?2';
const DESCRIBE_USER = `
  SELECT ?2 AS userId,
    (SELECT s.subject FROM subjects s WHERE s.user_id = ?2) AS subject,
    (SELECT count(*) FROM api_keys k WHERE k.user_id = ?2 AND k.expires_at > ?1) AS keys,
    (SELECT max(k.last_used_at) FROM api_keys k WHERE k.user_id = ?2 AND k.expires_at > ?1) AS lastUsedAt,
    EXISTS (SELECT 1 FROM user_policies p WHERE p.user_id = ?2) AS hasPolicy`;

// Rows held minus the expired ones not purged yet: 100k counter rows and a short range of the
// expiry index, rather than a million index entries.
const COUNT_LIVE = `
  SELECT (SELECT coalesce(sum(keys), 0) FROM user_key_counts)
    - (SELECT count(*) FROM api_keys WHERE expires_at <= ?1) AS n`;

const COUNT_CREATED = 'SELECT coalesce(sum(count), 0) AS n FROM key_creations WHERE bucket >= ?1';

const VERIFICATIONS = `
  SELECT code, sum(count) AS n FROM verification_counts WHERE bucket >= ?1 GROUP BY code`;

// The keys' VALID counts of the hours asked, summed once (materialized) for both rankings. A key's
// usage rows go with the key (same transaction) and are never written for a missing key, so every
// key counted is in api_keys: the ten keys are picked before their join.
const TOP = `
  WITH per_key AS MATERIALIZED (
    SELECT key_id, sum(valid) AS valid FROM key_usage WHERE bucket >= ?1 GROUP BY key_id HAVING sum(valid) > 0
  )
  SELECT 'key' AS kind, t.key_id, k.user_id, k.name, t.valid
  FROM (SELECT key_id, valid FROM per_key ORDER BY valid DESC LIMIT ?2) t JOIN api_keys k ON k.id = t.key_id
  UNION ALL
  SELECT 'user', NULL, user_id, NULL, valid FROM (
    SELECT k.user_id, sum(p.valid) AS valid FROM per_key p JOIN api_keys k ON k.id = p.key_id
    GROUP BY k.user_id ORDER BY valid DESC LIMIT ?2
  ) u`;

/** Up to this many ids with a prefix are sorted; past it the newest-first index is walked instead. */
const FEW_MATCHES = 2000;

export function createSqliteLookupStore(db: Db): LookupStore {
  const client = db.$client;
  const usersWithKeys = client.prepare(USERS_WITH_KEYS);
  const usersWithPolicy = client.prepare(USERS_WITH_POLICY);
  const describeUser = client.prepare(DESCRIBE_USER);
  const countLive = client.prepare(COUNT_LIVE);
  const countCreated = client.prepare(COUNT_CREATED);
  const verifications = client.prepare(VERIFICATIONS);
  const top = client.prepare(TOP);
  const { columns: keyWithCredits, join: creditsOfKey } = keyWithCreditsOf(apiKeys, keyCredits);

  // The primary key's range of ids starting with a prefix ('~' sorts after every character of an id).
  const fewWithPrefix = client.prepare(
    `SELECT count(*) AS n FROM (SELECT 1 FROM api_keys WHERE id >= ?1 AND id < ?2 LIMIT ${FEW_MATCHES})`,
  );
  /**
   * A prefix matching few ids is read on the primary key's range and its matches sorted; one matching
   * many (kg_ alone matches every key) walks the newest-first index, reading each id from it, until
   * the page is full: SQLite's planner would pick the range and sort them all (2 s at 1M keys).
   */
  const prefixRange = (prefix: string) => {
    const [low, high] = [prefix, `${prefix}~`];
    const many = (fewWithPrefix.get(low, high) as { n: number }).n >= FEW_MATCHES;
    return many
      ? sql`+${apiKeys.id} >= ${low} AND +${apiKeys.id} < ${high}`
      : sql`${apiKeys.id} >= ${low} AND ${apiKeys.id} < ${high}`;
  };

  const read = async <T>(query: () => T): Promise<T> => {
    try {
      return query();
    } catch (error) {
      unavailableOr(error);
    }
  };

  return {
    listUsers: ({ now, afterUserId, limit }) =>
      read(() => {
        const after = afterUserId ?? -1;
        const userIds = (rows: unknown[]) => (rows as Array<{ userId: number }>).map((row) => row.userId);
        const ids = firstUsers(
          userIds(usersWithKeys.all(now, after, limit)),
          userIds(usersWithPolicy.all(after, limit)),
          limit,
        );
        return ids.map((userId) => {
          const row = describeUser.get(now, userId) as Omit<UserRow, 'hasPolicy'> & { hasPolicy: number };
          return { ...row, hasPolicy: row.hasPolicy === 1 };
        });
      }),

    searchKeys: ({ now, after, limit, idPrefix, namePart }) =>
      read(() =>
        db
          .select(keyWithCredits)
          .from(apiKeys)
          .leftJoin(keyCredits, creditsOfKey)
          .where(
            and(
              gt(apiKeys.expiresAt, now),
              idPrefix === undefined ? undefined : prefixRange(idPrefix),
              // lower() folds ASCII letters only, as the caller folded namePart.
              namePart === undefined ? undefined : sql`instr(lower(${apiKeys.name}), ${namePart}) > 0`,
              after === undefined
                ? undefined
                : sql`(${apiKeys.createdAt}, ${apiKeys.id}) < (${after.createdAt}, ${after.id})`,
            ),
          )
          .orderBy(desc(apiKeys.createdAt), desc(apiKeys.id))
          .limit(limit)
          .all()
          .map(withCredits),
      ),

    countLiveKeys: (now) => read(() => (countLive.get(now) as { n: number }).n),

    countCreatedSince: (from) => read(() => (countCreated.get(from) as { n: number }).n),

    verificationsSince: (from) =>
      read(() => {
        const counts: Record<string, number> = {};
        for (const row of verifications.all(from) as Array<{ code: string; n: number }>)
          counts[row.code] = row.n;
        return counts;
      }),

    topSince: (from, limit) => read(() => rankingsOf(top.all(from, limit) as RankedRow[])),
  };
}
