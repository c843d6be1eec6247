// The ApiKeyStore on PostgreSQL, for any number of replicas on one database. Writes that arrive
// together share one transaction (group-commit.ts): each promise settles after that COMMIT returned
// (synchronous_commit on). The per-user cap holds across replicas because a create's batch first
// locks its user's row in user_key_counts (which triggers keep in step with api_keys); a delete,
// rotation or update NOTIFYs the other replicas in the same transaction, and LISTEN evicts their
// cached keys.

import { and, desc, eq, gt, inArray, lt, lte, or, sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/bun-sql';
import { lineageOf } from '../../apikeys/settings';
import type { ApiKeyRow, ApiKeyStore } from '../../apikeys/store';
import type { Logger } from '../../core/log';
import { HOUR_MS } from '../../usage/counter';
import type { OutboxMessage } from '../../webhooks/events';
import { keyChanges } from '../key-changes';
import { columnsOfUpdate, type JoinedCredits, keyWithCreditsOf, withCredits } from '../key-rows';
import { routeClientWarnings } from './client-warnings';
import { postgresCreditTakes } from './credits';
import { type CommitBatch, type JobGroup, PostgresGroupCommit } from './group-commit';
import type { PostgresDb } from './open';
import { apiKeys, keyCredits, keyUsage, userKeyCounts, userPolicies } from './schema';
import { unavailableCode, unavailableOr } from './unavailable';
import { insertOutbox, outboxParameter } from './webhooks';

/**
 * The NOTIFY channel: a payload is the sending replica's id, a space, and the comma-separated key ids,
 * or `user:<id>` when every key of that user went at once.
 */
export const KEYS_CHANNEL = 'keygate_keys';

const USER_PREFIX = 'user:';

// A NOTIFY payload must stay under 8000 bytes; a key id is at most 131 characters.
const IDS_PER_NOTIFY = 50;

type Row = typeof apiKeys.$inferSelect;

/** A key with its lineage's credits, in one read (the webhooks' and the lookups' stores read keys so too). */
export const { columns: keyWithCredits, join: creditsOfKey } = keyWithCreditsOf(apiKeys, keyCredits);
type Joined = Row & JoinedCredits;
// The hash arrives as hex text; the row is made by withCredits, so it has the shape every row has.
const toRow = (joined: Joined): ApiKeyRow =>
  withCredits({ ...joined, secretHash: Buffer.from(joined.secretHash, 'hex') });
const toColumns = ({ credits: _, ...row }: ApiKeyRow): typeof apiKeys.$inferInsert => ({
  ...row,
  secretHash: Buffer.from(row.secretHash).toString('hex'),
});
/**
 * The id a key lookup reads: the key's, else the nearest stored id below it, else the newest (the
 * interface says why). The materialized row computes both bounds, so both are looked up every time.
 */
const lookupIdFor = (id: string) =>
  sql`(WITH bounds AS MATERIALIZED (SELECT (SELECT max(k.id) FROM ${apiKeys} k WHERE k.id <= ${id}) AS below, (SELECT max(k.id) FROM ${apiKeys} k) AS newest) SELECT coalesce(below, newest) FROM bounds)`;
/** What a write's statements go through: drizzle over the batch's reserved connection. */
type Tx = Pick<PostgresDb, 'select' | 'insert' | 'update' | 'delete' | 'execute' | '$client'>;
/**
 * Adds the keys created per hour (rows of `bucket` and `n`) to key_creations, for the operator's
 * overview, in the create's own transaction; on the row of this connection's shard, so that
 * concurrent batches seldom wait for one another's row lock until their COMMIT.
 */
const COUNT_CREATIONS = (created: string) => `
    INSERT INTO key_creations (bucket, shard, count)
    SELECT bucket, pg_backend_pid() % 8, n FROM (${created}) AS created ORDER BY bucket
    ON CONFLICT (bucket, shard) DO UPDATE SET count = key_creations.count + EXCLUDED.count`;
const COUNT_CREATION = COUNT_CREATIONS('SELECT $1::bigint AS bucket, 1 AS n');

/**
 * Creates in one statement, each key inserted only while its user holds fewer than its cap of live
 * keys (the user's policy's maxKeys, else MAX_KEYS_PER_USER), read under the lock of the user's
 * counter row, which the batch holds, so a policy committed before is the one every later create obeys. The counter (rows held,
 * expired ones not yet purged included) is never below the live count, so under the cap it answers
 * alone; at the cap the live keys are counted exactly, so the cost no longer grows with the user's
 * keys. A user's earlier creates in the same statement count too (`before`): those allowed are the
 * first of the user's, so each one refused would have been refused alone, after the others. The
 * rows come as one JSON parameter typed text (typed json, Bun's client encodes the string once more);
 * the text is fixed, not built through drizzle per call, which cost more CPU than the rest of a create.
 */
const insertWithinCap = (withOutbox: boolean) => `WITH input AS (
    SELECT * FROM json_to_recordset($1::text::json) AS x(n integer, id text, secret_hash text, user_id bigint,
      level smallint, name text, created_at bigint, expires_at bigint, lineage text, rotated_at bigint,
      enabled boolean, meta text, ratelimit_limit integer, ratelimit_duration integer, permissions text,
      allowed_ips text, cap integer${withOutbox ? ', outbox json' : ''})
  ), ranked AS (
    SELECT input.*, row_number() OVER (PARTITION BY user_id ORDER BY n) - 1 AS before,
      coalesce((SELECT max_keys FROM user_policies p WHERE p.user_id = input.user_id), input.cap) AS user_cap
    FROM input
  ), inserted AS (
    INSERT INTO api_keys (id, secret_hash, user_id, level, name, created_at, expires_at, lineage,
      rotated_at, enabled, meta, ratelimit_limit, ratelimit_duration, permissions, allowed_ips)
    SELECT id, secret_hash, user_id, level, name, created_at, expires_at, lineage, rotated_at, enabled,
      meta, ratelimit_limit, ratelimit_duration, permissions, allowed_ips
    FROM ranked r
    WHERE (SELECT keys FROM user_key_counts c WHERE c.user_id = r.user_id) + r.before < r.user_cap
      OR (SELECT count(*) FROM api_keys k WHERE k.user_id = r.user_id AND k.expires_at > r.created_at)
        + r.before < r.user_cap
    ORDER BY n
    RETURNING id, created_at
  ), counted AS (
    ${COUNT_CREATIONS(`SELECT created_at - created_at % ${HOUR_MS} AS bucket, count(*) AS n FROM inserted GROUP BY 1`)}
  )${withOutbox ? OUTBOX_OF_INSERTED : ''}
  SELECT id FROM inserted`;

/**
 * With some creates carrying webhook messages, each inserted key's messages are inserted by the same
 * statement (a refused key's are not).
 */
const OUTBOX_OF_INSERTED = `, messages AS (
    INSERT INTO webhook_messages (id, endpoint_id, type, body, created_at, status, attempts, next_attempt_at)
    SELECT m.id, m.endpoint_id, m.type, m.body, m.created_at, 'pending', 0, m.created_at
    FROM input i JOIN inserted ON inserted.id = i.id,
      json_to_recordset(i.outbox) AS m(id text, endpoint_id text, type text, body text, created_at bigint)
    WHERE i.outbox IS NOT NULL
  )`;
const INSERT_WITHIN_CAP = insertWithinCap(false);
const INSERT_WITHIN_CAP_WITH_OUTBOX = insertWithinCap(true);

type NewKey = { row: ApiKeyRow; limit: number; outbox?: readonly OutboxMessage[] };
/** Creates standing together in a batch: one INSERT_WITHIN_CAP for all of them. */
const creates: JobGroup<NewKey, 'inserted' | 'limit-reached'> = {
  statement: (inputs) => ({
    sql: inputs.some((input) => input.outbox !== undefined)
      ? INSERT_WITHIN_CAP_WITH_OUTBOX
      : INSERT_WITHIN_CAP,
    params: [
      JSON.stringify(
        inputs.map(({ row, limit, outbox }, n) => ({
          n,
          id: row.id,
          secret_hash: Buffer.from(row.secretHash).toString('hex'),
          user_id: row.userId,
          level: row.level,
          name: row.name,
          created_at: row.createdAt,
          expires_at: row.expiresAt,
          lineage: row.lineage ?? null,
          rotated_at: row.rotatedAt ?? null,
          enabled: row.enabled ?? true,
          meta: row.meta ?? null,
          ratelimit_limit: row.ratelimitLimit ?? null,
          ratelimit_duration: row.ratelimitDuration ?? null,
          permissions: row.permissions ?? null,
          allowed_ips: row.allowedIps ?? null,
          cap: limit,
          ...(outbox === undefined ? {} : { outbox: outboxParameter(outbox) }),
        })),
      ),
    ],
  }),
  values: (rows, inputs) => {
    const inserted = new Set((rows as Array<{ id: string }>).map((row) => row.id));
    return inputs.map(({ row }) => (inserted.has(row.id) ? 'inserted' : 'limit-reached'));
  },
};

/** Sets a lineage's credits (create, update), or adds them. */
const setCredits = (tx: Tx, lineage: string, stored: NonNullable<ApiKeyRow['credits']>) => {
  // A set starts a credit cycle with what it set.
  const credits = { ...stored, setRemaining: stored.remaining, setAt: stored.refilledAt };
  return tx
    .insert(keyCredits)
    .values({ lineage, ...credits })
    .onConflictDoUpdate({ target: keyCredits.lineage, set: credits });
};
/** A lineage's credits go with the last of its keys (run after the delete, in its transaction). */
const dropCreditsOfGone = (tx: Tx, lineages: readonly string[]) =>
  lineages.length === 0
    ? Promise.resolve()
    : tx
        .delete(keyCredits)
        .where(
          and(
            inArray(keyCredits.lineage, [...new Set(lineages)]),
            sql`NOT EXISTS (SELECT 1 FROM ${apiKeys} k WHERE k.id = ${keyCredits.lineage})`,
            sql`NOT EXISTS (SELECT 1 FROM ${apiKeys} k WHERE k.lineage = ${keyCredits.lineage})`,
          ),
        );

export type PostgresStoreOptions = {
  /** Subscribe to other replicas' changes (off for one-shot commands such as `keygate purge`). */
  listen: boolean;
  /** While listening: where the SQL client's own warnings go (else they stay plain text on stderr). */
  logger?: Pick<Logger, 'info' | 'warn'>;
  /** Told after each write: committed, or refused because the database is unavailable. */
  onWrite?: (committed: boolean) => void;
  /** Told about every shared transaction after it committed or failed (metrics). */
  onCommit?: (batch: CommitBatch) => void;
};

/**
 * How many write batches run at once: half the pool, so reads (and a batch waiting for a counter
 * row another replica holds) still find a connection.
 */
const lanesFor = (poolSize: number) => Math.max(1, Math.floor(poolSize / 2));

export async function createPostgresApiKeyStore(
  db: PostgresDb,
  { listen, logger, onWrite, onCommit }: PostgresStoreOptions,
): Promise<ApiKeyStore> {
  const { announce, onKeysChanged } = keyChanges();
  const writer = new PostgresGroupCommit<Tx>(db.$client, {
    open: (connection) => drizzle({ client: connection }),
    lanes: lanesFor(db.$client.options.max ?? 10),
    observer: onCommit,
  });
  /**
   * Runs `work` (statements through drizzle, or one input of a group) in the next shared transaction; its
   * promise settles after COMMIT returned. `users`:
   * the users whose key counter the work reads under its lock (creates, capped rotations).
   */
  const write = <T, Input = never>(
    work: ((tx: Tx) => Promise<T>) | { group: JobGroup<Input, T>; input: Input },
    { users, signal }: { users?: readonly number[]; signal?: AbortSignal } = {},
  ) =>
    writer.write<T, Input>({ users, signal, ...(typeof work === 'function' ? { run: work } : work) }).then(
      (value) => {
        onWrite?.(true);
        return value;
      },
      (error: unknown) => {
        if (unavailableCode(error) !== undefined) onWrite?.(false);
        return unavailableOr(error);
      },
    );
  // This replica announces its own changes as they commit; its own notifications, echoed back, are skipped.
  const replicaId = crypto.randomUUID();
  const payloadOf = (ids: readonly string[]) => `${replicaId} ${ids.join(',')}`;
  const notify = async (tx: Pick<Tx, 'execute'>, ids: readonly string[]) => {
    for (let i = 0; i < ids.length; i += IDS_PER_NOTIFY) {
      await tx.execute(
        sql`SELECT pg_notify(${KEYS_CHANNEL}, ${payloadOf(ids.slice(i, i + IDS_PER_NOTIFY))})`,
      );
    }
  };
  /** Whether the user may hold one more live key: INSERT_WITHIN_CAP's condition, for a rotation. */
  const belowCap = (userId: number, now: number, limit: number) => {
    const cap = sql`coalesce((SELECT ${userPolicies.maxKeys} FROM ${userPolicies} WHERE ${userPolicies.userId} = ${userId}), ${limit})`;
    return sql`(
    (SELECT ${userKeyCounts.keys} FROM ${userKeyCounts} WHERE ${userKeyCounts.userId} = ${userId}) < ${cap}
    OR (SELECT count(*) FROM ${apiKeys} WHERE ${apiKeys.userId} = ${userId} AND ${apiKeys.expiresAt} > ${now}) < ${cap})`;
  };

  const drained = () => writer.drained();

  const stopRoutingWarnings = listen && logger ? routeClientWarnings(logger) : () => {};
  if (listen) {
    let subscribed = false;
    await db.$client
      .listen(
        KEYS_CHANNEL,
        (payload) => {
          const [sender, ids = ''] = payload.split(' ');
          if (sender === replicaId) return;
          if (ids.startsWith(USER_PREFIX)) announce({ userId: Number(ids.slice(USER_PREFIX.length)) });
          else announce(ids.split(',').filter(Boolean));
        },
        () => {
          // After a reconnect, notifications sent meanwhile are lost: forget every cached key.
          if (subscribed) {
            announce('all');
            logger?.info('database notifications resumed; cached keys forgotten');
          }
          subscribed = true;
        },
      )
      .catch((error: unknown) => {
        stopRoutingWarnings();
        return unavailableOr(error);
      });
  }

  return {
    async findKey(id) {
      const [row] = await db
        .select(keyWithCredits)
        .from(apiKeys)
        .leftJoin(keyCredits, creditsOfKey)
        .where(eq(apiKeys.id, lookupIdFor(id)))
        .catch(unavailableOr);
      const read = row === undefined ? undefined : toRow(row);
      return read?.id === id ? read : undefined;
    },

    async findKeysBySecretHashes(hashes) {
      if (hashes.length === 0) return [];
      const hex = hashes.map((hash) => Buffer.from(hash).toString('hex'));
      const rows = await db
        .select(keyWithCredits)
        .from(apiKeys)
        .leftJoin(keyCredits, creditsOfKey)
        .where(sql`${apiKeys.secretHash} = ANY(${`{${hex.join(',')}}`}::text[])`)
        .catch(unavailableOr);
      return rows.map(toRow);
    },

    async listLiveKeys({ userId, now, maxLevel, after, limit }) {
      const live = and(eq(apiKeys.userId, userId), gt(apiKeys.expiresAt, now), lte(apiKeys.level, maxLevel));
      const rows = await db
        .select(keyWithCredits)
        .from(apiKeys)
        .leftJoin(keyCredits, creditsOfKey)
        .where(
          after === undefined
            ? live
            : and(
                live,
                or(
                  lt(apiKeys.createdAt, after.createdAt),
                  and(eq(apiKeys.createdAt, after.createdAt), lt(apiKeys.id, after.id)),
                ),
              ),
        )
        .orderBy(desc(apiKeys.createdAt), desc(apiKeys.id))
        .limit(limit)
        .catch(unavailableOr);
      return rows.map(toRow);
    },

    async insertKeyWithinLimit(row, limit, signal, outbox) {
      const { credits } = row;
      // The messages are known before: the statement inserts them only with the key.
      const messages = outbox?.(row);
      const input: NewKey = messages === undefined ? { row, limit } : { row, limit, outbox: messages };
      const outcome = await (credits
        ? write(
            async (tx) => {
              const { sql, params } = creates.statement([input]);
              const [outcome] = creates.values(await tx.$client.unsafe(sql, params), [input]);
              if (outcome === 'inserted') await setCredits(tx, lineageOf(row), credits);
              return outcome as 'inserted' | 'limit-reached';
            },
            { users: [row.userId], signal },
          )
        : write({ group: creates, input }, { users: [row.userId], signal }));
      // Ids carry 131 random bits, so no other replica can have this one cached as unknown: a local event only.
      if (outcome === 'inserted') announce([row.id]);
      return outcome;
    },

    async deleteKey(id, signal, outbox) {
      const deleted = await write(
        async (tx) => {
          // One statement: the NOTIFY is sent only when a row went, without a second round trip.
          const rows = await tx.execute<{ lineage: string }>(sql`
          WITH gone AS (DELETE FROM ${apiKeys} WHERE ${apiKeys.id} = ${id}
            RETURNING coalesce(${apiKeys.lineage}, ${apiKeys.id}) AS lineage)
          SELECT lineage, pg_notify(${KEYS_CHANNEL}, ${payloadOf([id])}) FROM gone`);
          if (rows.length === 0) return false;
          // The key's usage rows go with it. A statement of its own, after the key's row lock: a usage
          // flush that held that lock has committed by now, and this statement sees its rows. Sent
          // together with the credits' statement, without waiting for its answer.
          await Promise.all([
            dropCreditsOfGone(
              tx,
              [...rows].map((row) => row.lineage),
            ),
            tx.delete(keyUsage).where(eq(keyUsage.keyId, id)),
            outbox ? insertOutbox(tx, outbox(id)) : undefined,
          ]);
          return true;
        },
        { signal },
      );
      if (deleted) announce([id]);
      return deleted;
    },

    async deleteKeysOfUser(userId, now, signal, outbox) {
      const live = await write(
        async (tx) => {
          if (outbox) {
            // The live keys' rows, for their events, locked and read before the delete.
            const rows = await tx
              .select(keyWithCredits)
              .from(apiKeys)
              .leftJoin(keyCredits, creditsOfKey)
              .where(and(eq(apiKeys.userId, userId), gt(apiKeys.expiresAt, now)))
              .for('update', { of: apiKeys });
            await insertOutbox(tx, outbox(rows.map(toRow)));
          }
          const rows = await tx.execute<{ id: string; lineage: string; expires_at: string | number }>(sql`
            DELETE FROM ${apiKeys} WHERE ${apiKeys.userId} = ${userId}
            RETURNING ${apiKeys.id}, coalesce(${apiKeys.lineage}, ${apiKeys.id}) AS lineage, ${apiKeys.expiresAt}`);
          const gone = [...rows];
          await dropCreditsOfGone(
            tx,
            gone.map((row) => row.lineage),
          );
          // After the keys' row locks, as for one key: a usage flush that held one has committed.
          if (gone.length > 0) {
            await tx.execute(
              sql`DELETE FROM ${keyUsage} WHERE ${keyUsage.keyId} = ANY(${`{${gone.map((row) => row.id).join(',')}}`}::text[])`,
            );
          }
          // One notification for them all: the other replicas evict every key of the user.
          await tx.execute(sql`SELECT pg_notify(${KEYS_CHANNEL}, ${`${replicaId} ${USER_PREFIX}${userId}`})`);
          return gone.filter((row) => Number(row.expires_at) > now).length;
        },
        { signal },
      );
      announce({ userId });
      return live;
    },

    async rotateKey(rotation, signal, outbox) {
      const { previousId, previousExpiresAt, next, limit } = rotation;
      const outcome = await write(
        async (tx) => {
          const now = next.createdAt;
          // Locked and checked again inside the transaction: a delete or rotation elsewhere may have won.
          const [previous] = await tx
            .select({
              expiresAt: apiKeys.expiresAt,
              belowCap:
                limit === undefined ? sql<boolean>`true` : sql<boolean>`${belowCap(next.userId, now, limit)}`,
            })
            .from(apiKeys)
            .where(eq(apiKeys.id, previousId))
            .for('update');
          if (previous === undefined || previous.expiresAt <= now) return 'not-found' as const;
          if (!previous.belowCap) return 'limit-reached' as const;
          // Sent together: each is answered in turn, and any failure fails the rotation.
          await Promise.all([
            tx
              .update(apiKeys)
              .set({ expiresAt: previousExpiresAt, rotatedAt: now })
              .where(eq(apiKeys.id, previousId)),
            tx.insert(apiKeys).values(toColumns(next)),
            tx.$client.unsafe(COUNT_CREATION, [now - (now % HOUR_MS)]),
            notify(tx, [previousId]),
            outbox ? insertOutbox(tx, outbox(rotation)) : undefined,
          ]);
          return 'rotated' as const;
        },
        { users: limit === undefined ? [] : [next.userId], signal },
      );
      if (outcome === 'rotated') announce([previousId, next.id]);
      return outcome;
    },

    async updateKey(id, update, now, signal, outbox) {
      const updated = await write(
        async (tx) => {
          // Locked and checked again inside the transaction: a delete or rotation elsewhere may have won.
          const [current] = await tx
            .select({ expiresAt: apiKeys.expiresAt, lineage: apiKeys.lineage })
            .from(apiKeys)
            .where(eq(apiKeys.id, id))
            .for('update');
          if (current === undefined || current.expiresAt <= now) return undefined;
          const { credits } = update;
          const set = columnsOfUpdate(update);
          if (Object.keys(set).length > 0) await tx.update(apiKeys).set(set).where(eq(apiKeys.id, id));
          const lineage = current.lineage ?? id;
          if (credits === null) await tx.delete(keyCredits).where(eq(keyCredits.lineage, lineage));
          else if (credits !== undefined) await setCredits(tx, lineage, credits);
          // Every key of the lineage, here and on the other replicas: its credits are theirs too.
          const family = await tx
            .select({ id: apiKeys.id })
            .from(apiKeys)
            .where(or(eq(apiKeys.id, lineage), eq(apiKeys.lineage, lineage)));
          const ids = family.map((row) => row.id);
          await notify(tx, ids);
          const [row] = await tx
            .select(keyWithCredits)
            .from(apiKeys)
            .leftJoin(keyCredits, creditsOfKey)
            .where(eq(apiKeys.id, id));
          if (row === undefined) return undefined;
          const updatedRow = toRow(row);
          if (outbox) await insertOutbox(tx, outbox(updatedRow));
          return { row: updatedRow, ids };
        },
        { signal },
      );
      if (updated) announce(updated.ids);
      return updated?.row;
    },

    takeCredits: postgresCreditTakes(db.$client),

    async deleteExpiredBatch(now, limit, outbox) {
      // SKIP LOCKED: replicas purging at the same time take different rows, and none waits on another.
      // It shares a transaction with the requests' writes of the moment, like any other write.
      const ids = await write(async (tx) => {
        let batch = sql`SELECT ${apiKeys.id} FROM ${apiKeys} WHERE ${apiKeys.expiresAt} <= ${now}
            ORDER BY ${apiKeys.expiresAt} LIMIT ${limit} FOR UPDATE SKIP LOCKED`;
        if (outbox) {
          // The batch's rows, locked and read first for their events; then deleted by id.
          const expired = await tx
            .select(keyWithCredits)
            .from(apiKeys)
            .leftJoin(keyCredits, creditsOfKey)
            .where(lte(apiKeys.expiresAt, now))
            .orderBy(apiKeys.expiresAt)
            .limit(limit)
            .for('update', { of: apiKeys, skipLocked: true });
          const rows = expired.map(toRow);
          await insertOutbox(tx, outbox(rows));
          batch = sql`SELECT unnest(${`{${rows.map((row) => row.id).join(',')}}`}::text[])`;
        }
        const rows = await tx.execute<{ id: string; lineage: string }>(sql`
          DELETE FROM ${apiKeys} WHERE ${apiKeys.id} = ANY(ARRAY(${batch}))
          RETURNING ${apiKeys.id}, coalesce(${apiKeys.lineage}, ${apiKeys.id}) AS lineage`);
        await dropCreditsOfGone(
          tx,
          [...rows].map((row) => row.lineage),
        );
        // Expired keys are refused everywhere already (the expiry is checked); no need to NOTIFY.
        const ids = [...rows].map((row) => row.id);
        if (ids.length > 0) await tx.delete(keyUsage).where(inArray(keyUsage.keyId, ids));
        return ids;
      });
      announce(ids);
      return ids.length;
    },

    onKeysChanged,

    drained,

    async ping() {
      try {
        await db.$client`SELECT 1`;
        return true;
      } catch {
        return false;
      }
    },

    async close() {
      await drained();
      await db.$client.close({ timeout: 5 });
      stopRoutingWarnings();
    },
  };
}
