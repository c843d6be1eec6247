// The ApiKeyStore on SQLite: writes go through the group-commit writer and resolve once committed;
// reads are prepared statements (synchronous underneath, Promises outside).

import { and, count, desc, eq, gt, inArray, lt, lte, or, sql } from 'drizzle-orm';
import { lineageOf } from '../../apikeys/settings';
import { type ApiKeyRow, type ApiKeyStore, StoreUnavailableError } from '../../apikeys/store';
import type { PoolsTake } from '../../limits/credits';
import { HOUR_MS } from '../../usage/counter';
import { secondPoolRefusal, takeFromPools } from '../credits-take';
import { keyChanges } from '../key-changes';
import { columnsOfUpdate, keyWithCreditsOf, withCredits } from '../key-rows';
import { checkpointInBackground } from './checkpoints';
import { sqliteCreditTakes } from './credits';
import { type CommitBatch, GroupCommitWriter } from './group-commit';
import type { Db } from './open';
import { apiKeys, keyCredits, keyUsage, userKeyCounts, userPolicies } from './schema';
import { sqliteOutboxWriter } from './webhooks';

// SQLite answers these when the disk, the file or another process's lock is in the way.
const UNAVAILABLE_CODES = /^SQLITE_(BUSY|LOCKED|FULL|IOERR|READONLY|CANTOPEN|PROTOCOL)/;

/** Rethrows an engine error that means "try again later" as the store's own StoreUnavailableError. */
export function unavailableOr(error: unknown): never {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && UNAVAILABLE_CODES.test(code)) {
    throw new StoreUnavailableError(code, { cause: error });
  }
  throw error;
}

const HASHES_PER_QUERY = 500;

/** A key with its lineage's credits, in one read (the webhooks' and the lookups' stores read keys so too). */
export const { columns: keyWithCredits, join: creditsOfKey } = keyWithCreditsOf(apiKeys, keyCredits);

/** The store, and its write path for the other tables' stores (subjects) to share its group commit. */
export type SqliteApiKeyStore = ApiKeyStore & {
  write<T>(work: () => T, committed?: (value: T) => void, signal?: AbortSignal): Promise<T>;
};

export function createSqliteApiKeyStore(
  db: Db,
  options: {
    onCommit?: (batch: CommitBatch) => void;
    /** How long writes wait for another process's write lock (default WRITE_LOCK_WAIT_MS). */
    writeLockWaitMs?: number;
    /** Run the WAL checkpoints on a thread of their own (a serving keygate); told if it fails. */
    backgroundCheckpoints?: { onFailure: (reason: string) => void };
    /** The connection's one writer, when another store (usage) shares it; else one of its own. */
    groupCommit?: GroupCommitWriter;
  } = {},
): SqliteApiKeyStore {
  const groupCommit =
    options.groupCommit ?? new GroupCommitWriter(db.$client, options.onCommit, options.writeLockWaitMs);
  const checkpoints =
    options.backgroundCheckpoints &&
    checkpointInBackground(db.$client, {
      holdWrites: () => groupCommit.hold(),
      onFailure: options.backgroundCheckpoints.onFailure,
    });
  const writer = {
    write<T>(work: () => T, committed?: (value: T) => void, signal?: AbortSignal): Promise<T> {
      return groupCommit.write(work, committed, signal).catch(unavailableOr);
    },
    drained: () => groupCommit.drained(),
  };
  const { announce, onKeysChanged } = keyChanges();
  const writeOutbox = sqliteOutboxWriter(db.$client);

  const selectKeys = () => db.select(keyWithCredits).from(apiKeys).leftJoin(keyCredits, creditsOfKey);
  const findJoined = selectKeys()
    .where(eq(apiKeys.id, sql.placeholder('id')))
    .prepare();
  const findById = { get: (params: { id: string }) => rowOf(findJoined.get(params)) };
  // The key lookup's row: the key's, else the nearest stored key's below it, else the newest's (the
  // interface says why). min() evaluates both of its arguments, so both bounds are looked up every
  // time; '~' sorts after every key id, so with nothing below, min() picks the newest.
  // It runs on every key cache miss (each key every KEY_CACHE_SECONDS): drizzle writes its SQL, and
  // bun:sqlite runs it and hands the values in column order to lookupRowOf (drizzle's mapping of the
  // joined row cost more than the read itself).
  const findForLookup = db.$client.prepare<unknown[], [string]>(
    selectKeys()
      .where(
        eq(
          apiKeys.id,
          sql`min(ifnull((SELECT max(k.id) FROM ${apiKeys} k WHERE k.id <= ${sql.placeholder('id')}), '~'), (SELECT max(k.id) FROM ${apiKeys} k))`,
        ),
      )
      .toSQL().sql,
  );
  const lookupFields = Object.keys(keyWithCredits);
  const lookupRowOf = (values: unknown[] | undefined): ApiKeyRow | undefined => {
    if (values === undefined) return undefined;
    const joined: Record<string, unknown> = {};
    for (let i = 0; i < lookupFields.length; i++) joined[lookupFields[i] as string] = values[i];
    // The two columns drizzle's schema reads in another mode than SQLite's own.
    joined.enabled = joined.enabled === 1;
    // A copy, as drizzle's mapping makes. A view on the read's bytes (on their `.buffer`) would give every
    // cached row an ArrayBuffer that the garbage collector tracks by a weak handle of its own: with
    // 10k keys cached, 10k more for every collection to visit (bench/HISTORY.md).
    joined.secretHash = Buffer.from(joined.secretHash as Uint8Array);
    return withCredits(joined as Parameters<typeof withCredits>[0]);
  };
  const rowOf = (joined: Parameters<typeof withCredits>[0] | undefined): ApiKeyRow | undefined =>
    joined === undefined ? undefined : withCredits(joined);

  const lineageIds = db
    .select({ id: apiKeys.id })
    .from(apiKeys)
    .where(or(eq(apiKeys.id, sql.placeholder('lineage')), eq(apiKeys.lineage, sql.placeholder('lineage'))))
    .prepare();
  const insertCredits = db
    .insert(keyCredits)
    .values({
      lineage: sql.placeholder('lineage'),
      remaining: sql.placeholder('remaining'),
      refillAmount: sql.placeholder('refillAmount'),
      refillIntervalMs: sql.placeholder('refillIntervalMs'),
      refilledAt: sql.placeholder('refilledAt'),
      // A set (create, update) starts a credit cycle with what it set.
      setRemaining: sql.placeholder('remaining'),
      setAt: sql.placeholder('refilledAt'),
    })
    .onConflictDoUpdate({
      target: keyCredits.lineage,
      set: {
        remaining: sql`excluded.remaining`,
        refillAmount: sql`excluded.refill_amount`,
        refillIntervalMs: sql`excluded.refill_interval_ms`,
        refilledAt: sql`excluded.refilled_at`,
        setRemaining: sql`excluded.set_remaining`,
        setAt: sql`excluded.set_at`,
      },
    })
    .prepare();
  const deleteCredits = db
    .delete(keyCredits)
    .where(eq(keyCredits.lineage, sql.placeholder('lineage')))
    .prepare();
  // A lineage's credits go with the last of its keys.
  const deleteOrphanCredits = db
    .delete(keyCredits)
    .where(
      and(
        eq(keyCredits.lineage, sql.placeholder('lineage')),
        sql`NOT EXISTS (SELECT 1 FROM ${apiKeys} WHERE ${apiKeys.id} = ${sql.placeholder('lineage')})`,
        sql`NOT EXISTS (SELECT 1 FROM ${apiKeys} WHERE ${apiKeys.lineage} = ${sql.placeholder('lineage')})`,
      ),
    )
    .prepare();
  const takeFrom = sqliteCreditTakes(db.$client);

  const dropCreditsOfGone = (lineages: Iterable<string>) => {
    for (const lineage of new Set(lineages)) deleteOrphanCredits.run({ lineage });
  };

  const countLive = db
    .select({ n: count() })
    .from(apiKeys)
    .where(and(eq(apiKeys.userId, sql.placeholder('userId')), gt(apiKeys.expiresAt, sql.placeholder('now'))))
    .prepare();

  const liveOf = and(
    eq(apiKeys.userId, sql.placeholder('userId')),
    gt(apiKeys.expiresAt, sql.placeholder('now')),
    lte(apiKeys.level, sql.placeholder('maxLevel')),
  );
  const newestFirst = [desc(apiKeys.createdAt), desc(apiKeys.id)] as const;
  const listFirst = selectKeys()
    .where(liveOf)
    .orderBy(...newestFirst)
    .limit(sql.placeholder('limit'))
    .prepare();
  const listAfter = selectKeys()
    .where(
      and(
        liveOf,
        or(
          lt(apiKeys.createdAt, sql.placeholder('afterCreatedAt')),
          and(
            eq(apiKeys.createdAt, sql.placeholder('afterCreatedAt')),
            lt(apiKeys.id, sql.placeholder('afterId')),
          ),
        ),
      ),
    )
    .orderBy(...newestFirst)
    .limit(sql.placeholder('limit'))
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
      lineage: sql.placeholder('lineage'),
      enabled: sql.placeholder('enabled'),
      meta: sql.placeholder('meta'),
      ratelimitLimit: sql.placeholder('ratelimitLimit'),
      ratelimitDuration: sql.placeholder('ratelimitDuration'),
      permissions: sql.placeholder('permissions'),
      allowedIps: sql.placeholder('allowedIps'),
    })
    .prepare();
  // Keys created per hour, for the operator's overview: in the create's (or rotation's) transaction.
  const countCreation = db.$client.prepare(`
    INSERT INTO key_creations (bucket, shard, count) VALUES (?1, 0, 1)
    ON CONFLICT (bucket, shard) DO UPDATE SET count = count + 1`);
  const insertRow = (row: ApiKeyRow) => {
    countCreation.run(row.createdAt - (row.createdAt % HOUR_MS));
    insert.run({
      ...row,
      lineage: row.lineage ?? null,
      enabled: row.enabled ?? true,
      meta: row.meta ?? null,
      ratelimitLimit: row.ratelimitLimit ?? null,
      ratelimitDuration: row.ratelimitDuration ?? null,
      permissions: row.permissions ?? null,
      allowedIps: row.allowedIps ?? null,
    });
    if (row.credits) insertCredits.run({ lineage: lineageOf(row), ...row.credits });
  };

  const retire = db
    .update(apiKeys)
    .set({ expiresAt: sql`${sql.placeholder('expiresAt')}`, rotatedAt: sql`${sql.placeholder('rotatedAt')}` })
    .where(eq(apiKeys.id, sql.placeholder('id')))
    .prepare();

  const deleteById = db
    .delete(apiKeys)
    .where(eq(apiKeys.id, sql.placeholder('id')))
    .returning({ id: apiKeys.id, lineage: apiKeys.lineage })
    .prepare();
  // A key's usage rows go with it, in the same transaction.
  const deleteUsageOf = db
    .delete(keyUsage)
    .where(eq(keyUsage.keyId, sql.placeholder('id')))
    .prepare();

  // Revoking every key of a user: their usage rows first (while the keys still say whose they are).
  const deleteUsageOfUser = db
    .delete(keyUsage)
    .where(
      inArray(
        keyUsage.keyId,
        db
          .select({ id: apiKeys.id })
          .from(apiKeys)
          .where(eq(apiKeys.userId, sql.placeholder('userId'))),
      ),
    )
    .prepare();
  const deleteOfUser = db
    .delete(apiKeys)
    .where(eq(apiKeys.userId, sql.placeholder('userId')))
    .returning({ lineage: apiKeys.lineage, id: apiKeys.id, expiresAt: apiKeys.expiresAt })
    .prepare();

  // The rows an outbox hook is given: read in the deleting transaction, before the delete.
  const liveKeysOfUser = selectKeys()
    .where(and(eq(apiKeys.userId, sql.placeholder('userId')), gt(apiKeys.expiresAt, sql.placeholder('now'))))
    .prepare();
  const expiredBatch = selectKeys()
    .where(lte(apiKeys.expiresAt, sql.placeholder('now')))
    .orderBy(apiKeys.expiresAt)
    .limit(sql.placeholder('limit'))
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
    .returning({ id: apiKeys.id, lineage: apiKeys.lineage })
    .prepare();

  const rowsHeld = db
    .select({ keys: userKeyCounts.keys })
    .from(userKeyCounts)
    .where(eq(userKeyCounts.userId, sql.placeholder('userId')))
    .prepare();
  const policyCap = db
    .select({ maxKeys: userPolicies.maxKeys })
    .from(userPolicies)
    .where(eq(userPolicies.userId, sql.placeholder('userId')))
    .prepare();
  const liveCount = (userId: number, now: number) => countLive.get({ userId, now })?.n ?? 0;
  /**
   * Whether the user may hold one more live key. The counter of rows held (kept in step by triggers on
   * api_keys, drizzle/0005) is never below the live count, so under the cap it answers alone; at the
   * cap (expired rows not yet purged may be in it) the live keys are counted exactly. Either way the
   * cost does not grow with the user's keys.
   */
  const belowCap = (userId: number, now: number, limit: number) => {
    // The user's policy's maxKeys replaces MAX_KEYS_PER_USER, read in the same transaction.
    const cap = policyCap.get({ userId })?.maxKeys ?? limit;
    return (rowsHeld.get({ userId })?.keys ?? 0) < cap || liveCount(userId, now) < cap;
  };

  return {
    findKey(id) {
      try {
        const read = lookupRowOf(findForLookup.values(id)[0]);
        return read?.id === id ? read : undefined;
      } catch (error) {
        unavailableOr(error);
      }
    },

    async findKeysBySecretHashes(hashes) {
      const found: ApiKeyRow[] = [];
      // In slices, so that no statement nears SQLite's limit on parameters.
      for (let i = 0; i < hashes.length; i += HASHES_PER_QUERY) {
        const slice = hashes.slice(i, i + HASHES_PER_QUERY).map((hash) => Buffer.from(hash));
        try {
          const rows = selectKeys().where(inArray(apiKeys.secretHash, slice)).all();
          found.push(...rows.map(withCredits));
        } catch (error) {
          unavailableOr(error);
        }
      }
      return found;
    },

    async listLiveKeys({ userId, now, maxLevel, after, limit }) {
      const rows =
        after === undefined
          ? listFirst.all({ userId, now, maxLevel, limit })
          : listAfter.all({
              userId,
              now,
              maxLevel,
              limit,
              afterCreatedAt: after.createdAt,
              afterId: after.id,
            });
      return rows.map(withCredits);
    },

    insertKeyWithinLimit(row: ApiKeyRow, limit: number, signal?: AbortSignal, outbox?) {
      return writer.write(
        () => {
          if (!belowCap(row.userId, row.createdAt, limit)) return 'limit-reached' as const;
          insertRow(row);
          if (outbox) writeOutbox(outbox(row));
          return 'inserted' as const;
        },
        (outcome) => {
          // A negative cache entry for this id (someone guessed it) must go.
          if (outcome === 'inserted') announce([row.id]);
        },
        signal,
      );
    },

    deleteKey(id, signal, outbox) {
      return writer.write(
        () => {
          const gone = deleteById.all({ id });
          if (gone.length === 0) return false;
          dropCreditsOfGone(gone.map(lineageOf));
          deleteUsageOf.run({ id });
          if (outbox) writeOutbox(outbox(id));
          return true;
        },
        (deleted) => {
          if (deleted) announce([id]);
        },
        signal,
      );
    },

    deleteKeysOfUser(userId, now, signal, outbox) {
      return writer.write(
        () => {
          if (outbox) writeOutbox(outbox(liveKeysOfUser.all({ userId, now }).map(withCredits)));
          deleteUsageOfUser.run({ userId });
          const gone = deleteOfUser.all({ userId });
          dropCreditsOfGone(gone.map(lineageOf));
          return gone.filter((row) => row.expiresAt > now).length;
        },
        () => announce({ userId }),
        signal,
      );
    },

    rotateKey(rotation, signal, outbox) {
      const { previousId, previousExpiresAt, next, limit } = rotation;
      return writer.write(
        () => {
          const now = next.createdAt;
          // Checked again inside the transaction: a delete may have committed since the service looked.
          const previous = findById.get({ id: previousId });
          if (previous === undefined || previous.expiresAt <= now) return 'not-found' as const;
          if (limit !== undefined && !belowCap(next.userId, now, limit)) return 'limit-reached' as const;
          retire.run({ id: previousId, expiresAt: previousExpiresAt, rotatedAt: now });
          insertRow(next);
          if (outbox) writeOutbox(outbox(rotation));
          return 'rotated' as const;
        },
        (outcome) => {
          if (outcome === 'rotated') announce([previousId, next.id]);
        },
        signal,
      );
    },

    updateKey(id, update, now, signal, outbox) {
      return writer
        .write(
          () => {
            // Checked again inside the transaction: a delete may have committed since the service looked.
            const current = findById.get({ id });
            if (current === undefined || current.expiresAt <= now) return undefined;
            const { credits } = update;
            const set = columnsOfUpdate(update);
            if (Object.keys(set).length > 0) db.update(apiKeys).set(set).where(eq(apiKeys.id, id)).run();
            const lineage = lineageOf(current);
            if (credits === null) deleteCredits.run({ lineage });
            else if (credits !== undefined) insertCredits.run({ lineage, ...credits });
            const row = findById.get({ id });
            if (outbox && row) writeOutbox(outbox(row));
            return { row, lineage };
          },
          (updated) => {
            // Every key of the lineage: its credits are theirs too.
            if (updated) announce(lineageIds.all({ lineage: updated.lineage }).map((row) => row.id));
          },
          signal,
        )
        .then((updated) => updated?.row);
    },

    takeCredits(pools, cost, now) {
      // One job of the group commit: a refusal by the key's pool rolls the user's take back with it.
      return writer
        .write(
          () => takeFromPools(pools, (pool, id) => takeFrom(pool, id, cost, now)) as PoolsTake | undefined,
        )
        .catch(secondPoolRefusal);
    },

    deleteExpiredBatch(now, limit, outbox) {
      return writer
        .write(
          () => {
            let gone: Array<{ id: string; lineage: string | null }>;
            if (outbox) {
              // Read first, for the events' key info, then deleted by id in the same transaction.
              const rows = expiredBatch.all({ now, limit }).map(withCredits);
              gone = rows.flatMap((row) => deleteById.all({ id: row.id }));
              writeOutbox(outbox(rows));
            } else gone = deleteExpired.all({ now, limit });
            dropCreditsOfGone(gone.map(lineageOf));
            for (const { id } of gone) deleteUsageOf.run({ id });
            return gone.map((row) => row.id);
          },
          (ids) => announce(ids),
        )
        .then((ids) => ids.length);
    },

    onKeysChanged,

    write: writer.write,

    drained: () => writer.drained(),

    async ping() {
      return db.$client.query('SELECT 1 AS ok').get() !== null;
    },

    async close() {
      await groupCommit.drained();
      await checkpoints?.stop();
      db.$client.close();
    },
  };
}
