// The ApiKeyStore on PostgreSQL, for any number of replicas on one database. Each write is its own
// transaction (COMMIT returned before its promise resolves, synchronous_commit on); the per-user cap
// holds across replicas because a create first locks its user's row in user_key_counts (which
// triggers keep in step with api_keys); a delete or rotation NOTIFYs the other replicas in the same
// transaction, and LISTEN evicts their cached keys.

import { and, count, desc, eq, getTableColumns, gt, inArray, lt, lte, or, sql } from 'drizzle-orm';
import { lineageOf } from '../../apikeys/settings';
import type { ApiKeyRow, ApiKeyStore } from '../../apikeys/store';
import { RequestGoneError } from '../../core/errors';
import type { Logger } from '../../core/log';
import { keyChanges } from '../key-changes';
import { withCredits } from '../key-rows';
import { routeClientWarnings } from './client-warnings';
import { creditsTakerOf } from './credits-batch';
import type { PostgresDb } from './open';
import { apiKeys, keyCredits, keyUsage, userKeyCounts } from './schema';
import { unavailableCode, unavailableOr } from './unavailable';

/** The NOTIFY channel: a payload is the sending replica's id, a space, and the comma-separated key ids. */
export const KEYS_CHANNEL = 'keygate_keys';

// A NOTIFY payload must stay under 8000 bytes; a key id is at most 131 characters.
const IDS_PER_NOTIFY = 50;

type Row = typeof apiKeys.$inferSelect;

// A key with its lineage's credits, in one read.
const keyWithCredits = {
  ...getTableColumns(apiKeys),
  creditsRemaining: keyCredits.remaining,
  creditsRefillAmount: keyCredits.refillAmount,
  creditsRefillIntervalMs: keyCredits.refillIntervalMs,
  creditsRefilledAt: keyCredits.refilledAt,
};
const creditsOfKey = eq(keyCredits.lineage, sql`coalesce(${apiKeys.lineage}, ${apiKeys.id})`);
type Joined = Row & Parameters<typeof withCredits>[0];
const toRow = (joined: Joined): ApiKeyRow => {
  const row = withCredits(joined);
  return { ...row, secretHash: Buffer.from(row.secretHash as unknown as string, 'hex') };
};
const toColumns = ({ credits: _, ...row }: ApiKeyRow): typeof apiKeys.$inferInsert => ({
  ...row,
  secretHash: Buffer.from(row.secretHash).toString('hex'),
});
type Tx = Parameters<Parameters<PostgresDb['transaction']>[0]>[0];
/** Sets a lineage's credits (create, update), or adds them. */
const setCredits = (tx: Tx, lineage: string, credits: NonNullable<ApiKeyRow['credits']>) =>
  tx
    .insert(keyCredits)
    .values({ lineage, ...credits })
    .onConflictDoUpdate({ target: keyCredits.lineage, set: credits });
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
  logger?: Pick<
    Logger,
    'info' | 'warn'
  > /** Told after each write transaction: committed, or refused because the database is unavailable. */;
  onWrite?: (committed: boolean) => void;
};

export async function createPostgresApiKeyStore(
  db: PostgresDb,
  { listen, logger, onWrite }: PostgresStoreOptions,
): Promise<ApiKeyStore> {
  const { announce, onKeysChanged } = keyChanges();
  const inFlight = new Set<Promise<unknown>>();
  /** Runs one write transaction; its promise settles after COMMIT returned and the change is announced. */
  const write = <T>(
    work: (tx: Parameters<Parameters<PostgresDb['transaction']>[0]>[0]) => Promise<T>,
    request?: AbortSignal,
  ) => {
    const done = db
      .transaction(async (tx) => {
        // Durability must not depend on the server's default: a 201 or 204 means the commit is on
        // disk. Per transaction, not in the startup message: PgBouncer refuses unknown startup
        // parameters by default, and a SET LOCAL passes through it in any pooling mode.
        await tx.execute(sql`SET LOCAL synchronous_commit TO on`);
        const value = await work(tx);
        // As in SQLite's group commit: a change whose answer nobody can receive (Bun closed the
        // connection, README "Pipelined requests") is rolled back rather than committed.
        if (request?.aborted) throw new RequestGoneError();
        return value;
      })
      .then(
        (value) => {
          onWrite?.(true);
          return value;
        },
        (error: unknown) => {
          if (unavailableCode(error) !== undefined) onWrite?.(false);
          return unavailableOr(error);
        },
      );
    inFlight.add(done);
    const forget = () => inFlight.delete(done);
    done.then(forget, forget);
    return done;
  };
  /**
   * A user's creates and capped rotations wait for each other on the user's counter row anyway. Here
   * they also queue in this replica, before taking a pooled connection: otherwise one busy user's
   * queued writes would each hold a connection while waiting for that lock, and every other user's
   * request would wait for the pool (measured: another user's create waited ~0.8 s beside one user
   * creating on 63 connections).
   */
  const userQueues = new Map<number, Promise<unknown>>();
  const inUserTurn = <T>(userId: number, work: () => Promise<T>): Promise<T> => {
    const mine = (userQueues.get(userId) ?? Promise.resolve()).then(work, work);
    const settled = mine.catch(() => undefined);
    userQueues.set(userId, settled);
    settled.then(() => {
      if (userQueues.get(userId) === settled) userQueues.delete(userId);
    });
    return mine;
  };
  // This replica announces its own changes as they commit; its own notifications, echoed back, are skipped.
  const replicaId = crypto.randomUUID();
  const payloadOf = (ids: readonly string[]) => `${replicaId} ${ids.join(',')}`;
  const notify = async (tx: { execute: PostgresDb['execute'] }, ids: readonly string[]) => {
    for (let i = 0; i < ids.length; i += IDS_PER_NOTIFY) {
      await tx.execute(
        sql`SELECT pg_notify(${KEYS_CHANNEL}, ${payloadOf(ids.slice(i, i + IDS_PER_NOTIFY))})`,
      );
    }
  };
  /**
   * Locks the user's counter row until the transaction ends and answers the rows it counts. The lock
   * serialises the user's creates and capped rotations across every replica: the next one waits here
   * and then reads the count this one's insert left. A user's first key creates the row (at 0).
   */
  const lockKeysHeld = async (tx: Pick<PostgresDb, 'insert'>, userId: number) => {
    const [row] = await tx
      .insert(userKeyCounts)
      .values({ userId, keys: 0 })
      .onConflictDoUpdate({ target: userKeyCounts.userId, set: { keys: sql`${userKeyCounts.keys}` } })
      .returning({ keys: userKeyCounts.keys });
    return row?.keys ?? 0;
  };
  const liveCount = async (tx: Pick<PostgresDb, 'select'>, userId: number, now: number) => {
    const [row] = await tx
      .select({ n: count() })
      .from(apiKeys)
      .where(and(eq(apiKeys.userId, userId), gt(apiKeys.expiresAt, now)));
    return row?.n ?? 0;
  };
  /**
   * Whether the user may hold one more live key, under the counter row's lock. The counter (rows held,
   * expired ones not yet purged included) is never below the live count, so under the cap it answers
   * alone; at the cap the live keys are counted exactly, so the cost no longer grows with the user's keys.
   */
  const belowCap = async (
    tx: Pick<PostgresDb, 'insert' | 'select'>,
    userId: number,
    now: number,
    limit: number,
  ) => (await lockKeysHeld(tx, userId)) < limit || (await liveCount(tx, userId, now)) < limit;

  async function drained(): Promise<void> {
    await Promise.allSettled([...inFlight]);
  }

  const stopRoutingWarnings = listen && logger ? routeClientWarnings(logger) : () => {};
  if (listen) {
    let subscribed = false;
    await db.$client
      .listen(
        KEYS_CHANNEL,
        (payload) => {
          const [sender, ids = ''] = payload.split(' ');
          if (sender !== replicaId) announce(ids.split(',').filter(Boolean));
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
        .where(eq(apiKeys.id, id))
        .catch(unavailableOr);
      return row === undefined ? undefined : toRow(row);
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

    async insertKeyWithinLimit(row, limit, signal) {
      const outcome = await inUserTurn(row.userId, () =>
        write(async (tx) => {
          if (!(await belowCap(tx, row.userId, row.createdAt, limit))) return 'limit-reached' as const;
          await tx.insert(apiKeys).values(toColumns(row));
          if (row.credits) await setCredits(tx, lineageOf(row), row.credits);
          return 'inserted' as const;
        }, signal),
      );
      // Ids carry 131 random bits, so no other replica can have this one cached as unknown: a local event only.
      if (outcome === 'inserted') announce([row.id]);
      return outcome;
    },

    async deleteKey(id, signal) {
      const deleted = await write(async (tx) => {
        // One statement: the NOTIFY is sent only when a row went, without a second round trip.
        const rows = await tx.execute<{ lineage: string }>(sql`
          WITH gone AS (DELETE FROM ${apiKeys} WHERE ${apiKeys.id} = ${id}
            RETURNING coalesce(${apiKeys.lineage}, ${apiKeys.id}) AS lineage)
          SELECT lineage, pg_notify(${KEYS_CHANNEL}, ${payloadOf([id])}) FROM gone`);
        if (rows.length === 0) return false;
        await dropCreditsOfGone(
          tx,
          [...rows].map((row) => row.lineage),
        );
        // The key's usage rows go with it. A statement of its own, after the key's row lock: a usage
        // flush that held that lock has committed by now, and this statement sees its rows.
        await tx.delete(keyUsage).where(eq(keyUsage.keyId, id));
        return true;
      }, signal);
      if (deleted) announce([id]);
      return deleted;
    },

    async rotateKey({ previousId, previousExpiresAt, next, limit }, signal) {
      const outcome = await inUserTurn(next.userId, () =>
        write(async (tx) => {
          const now = next.createdAt;
          // Locked and checked again inside the transaction: a delete or rotation elsewhere may have won.
          // The key row before the counter row, as a delete takes them: the two cannot deadlock.
          const [previous] = await tx
            .select({ expiresAt: apiKeys.expiresAt })
            .from(apiKeys)
            .where(eq(apiKeys.id, previousId))
            .for('update');
          if (previous === undefined || previous.expiresAt <= now) return 'not-found' as const;
          if (limit !== undefined && !(await belowCap(tx, next.userId, now, limit))) {
            return 'limit-reached' as const;
          }
          await tx
            .update(apiKeys)
            .set({ expiresAt: previousExpiresAt, rotatedAt: now })
            .where(eq(apiKeys.id, previousId));
          await tx.insert(apiKeys).values(toColumns(next));
          await notify(tx, [previousId]);
          return 'rotated' as const;
        }, signal),
      );
      if (outcome === 'rotated') announce([previousId, next.id]);
      return outcome;
    },

    async updateKey(id, update, now, signal) {
      const updated = await write(async (tx) => {
        // Locked and checked again inside the transaction: a delete or rotation elsewhere may have won.
        const [current] = await tx
          .select({ expiresAt: apiKeys.expiresAt, lineage: apiKeys.lineage })
          .from(apiKeys)
          .where(eq(apiKeys.id, id))
          .for('update');
        if (current === undefined || current.expiresAt <= now) return undefined;
        const { ratelimit, credits, ...columns } = update;
        const set = {
          ...columns,
          ...(ratelimit === undefined
            ? {}
            : { ratelimitLimit: ratelimit?.limit ?? null, ratelimitDuration: ratelimit?.duration ?? null }),
        };
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
        return row === undefined ? undefined : { row: toRow(row), ids };
      }, signal);
      if (updated) announce(updated.ids);
      return updated?.row;
    },

    takeCredits(lineage, cost, now) {
      // With the takes of the same turn of the event loop: one call and one commit for them all,
      // each take guarded and in order under the pool's row lock (credits-batch.ts).
      return creditsTakerOf(db.$client)(lineage, cost, now);
    },

    async deleteExpiredBatch(now, limit) {
      // SKIP LOCKED: replicas purging at the same time take different rows, and none waits on another.
      const ids = await write(async (tx) => {
        const rows = await tx.execute<{ id: string; lineage: string }>(sql`
          DELETE FROM ${apiKeys} WHERE ${apiKeys.id} = ANY(ARRAY(
            SELECT ${apiKeys.id} FROM ${apiKeys} WHERE ${apiKeys.expiresAt} <= ${now}
            ORDER BY ${apiKeys.expiresAt} LIMIT ${limit} FOR UPDATE SKIP LOCKED))
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
