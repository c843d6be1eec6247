// The WebhookStore on SQLite, and the outbox's insert that the key and policy stores run inside their
// own jobs of the group commit. Writes go through the same writer (one transaction, one fsync per
// batch); one process holds a SQLite file, so claiming a message needs no lock beyond that.
import type { Database } from 'bun:sqlite';
import { and, desc, eq, inArray, isNotNull, lte, sql } from 'drizzle-orm';
import type { OutboxMessage } from '../../webhooks/events';
import type {
  ClaimedMessage,
  StoredEndpoint,
  WebhookChangedListener,
  WebhookStore,
} from '../../webhooks/store';
import { withCredits } from '../key-rows';
import type { Db } from './open';
import {
  apiKeys,
  keyCredits,
  webhookAttempts,
  webhookEndpoints,
  webhookMarks,
  webhookMessages,
} from './schema';
import { creditsOfKey, keyWithCredits, type SqliteApiKeyStore, unavailableOr } from './store';

/** Inserts outbox messages; runs inside the caller's job of the group commit (its transaction). */
export function sqliteOutboxWriter(client: Database) {
  const insert = client.prepare(
    `INSERT INTO webhook_messages (id, endpoint_id, type, body, created_at, status, attempts, next_attempt_at)
     VALUES (?, ?, ?, ?, ?, 'pending', 0, ?)`,
  );
  return (messages: readonly OutboxMessage[]) => {
    for (const m of messages) insert.run(m.id, m.endpointId, m.type, m.body, m.createdAt, m.createdAt);
  };
}

type EndpointRow = typeof webhookEndpoints.$inferSelect;

export const endpointOf = (row: EndpointRow): StoredEndpoint => ({
  ...row,
  events: JSON.parse(row.events) as string[],
});

export function createSqliteWebhookStore(db: Db, write: SqliteApiKeyStore['write']): WebhookStore {
  const listeners = new Set<WebhookChangedListener>();
  const changed = () => {
    for (const listener of listeners) listener();
  };
  const writeOutbox = sqliteOutboxWriter(db.$client);
  const anyDue = db.$client.prepare<{ one: number }, [number]>(
    'SELECT 1 AS one FROM webhook_messages WHERE next_attempt_at IS NOT NULL AND next_attempt_at <= ? LIMIT 1',
  );
  // Prepared once: a delivery records its attempt in these (building them per call cost more).
  const settleAttempt = db.$client.prepare<
    { id: string },
    [number, string, number | null, number | null, string, number]
  >(
    'UPDATE webhook_messages SET attempts = ?, status = ?, next_attempt_at = ?, settled_at = ? WHERE id = ? AND attempts = ? RETURNING id',
  );
  const insertAttempt = db.$client.prepare<unknown, [string, number, number, number | null, string | null]>(
    'INSERT INTO webhook_attempts (message_id, n, at, status, error) VALUES (?, ?, ?, ?, ?)',
  );
  const clearFailing = db.$client.prepare<unknown, [string]>(
    'UPDATE webhook_endpoints SET failing_since = NULL WHERE id = ?',
  );
  const setFailing = db.$client.prepare<unknown, [number, string]>(
    'UPDATE webhook_endpoints SET failing_since = coalesce(failing_since, ?) WHERE id = ?',
  );
  const read = <T>(work: () => T): Promise<T> => {
    try {
      return Promise.resolve(work());
    } catch (error) {
      return unavailableOr(error);
    }
  };
  const findEndpoint = (id: string) => {
    const row = db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, id)).get();
    return row === undefined ? undefined : endpointOf(row);
  };

  return {
    insertEndpoint(endpoint) {
      return write(() => {
        db.insert(webhookEndpoints)
          .values({ ...endpoint, events: JSON.stringify(endpoint.events) })
          .run();
      }, changed);
    },

    listEndpoints: () =>
      read(() =>
        db.select().from(webhookEndpoints).orderBy(webhookEndpoints.createdAt).all().map(endpointOf),
      ),

    findEndpoint: (id) => read(() => findEndpoint(id)),

    updateEndpoint(id, change) {
      return write(() => {
        const { events, ...rest } = change;
        const set = { ...rest, ...(events === undefined ? {} : { events: JSON.stringify(events) }) };
        if (Object.keys(set).length > 0) {
          db.update(webhookEndpoints).set(set).where(eq(webhookEndpoints.id, id)).run();
        }
        return findEndpoint(id);
      }, changed);
    },

    rotateSecret(id, secret, previousUntil) {
      return write(() => {
        const rows = db
          .update(webhookEndpoints)
          .set({
            previousSecret: sql`${webhookEndpoints.secret}`,
            previousSecretUntil: previousUntil,
            secret,
          })
          .where(eq(webhookEndpoints.id, id))
          .returning({ id: webhookEndpoints.id })
          .all();
        return rows.length > 0;
      });
    },

    deleteEndpoint(id) {
      return write(() => {
        db.run(
          sql`DELETE FROM ${webhookAttempts} WHERE ${webhookAttempts.messageId} IN (SELECT ${webhookMessages.id} FROM ${webhookMessages} WHERE ${webhookMessages.endpointId} = ${id})`,
        );
        db.delete(webhookMessages).where(eq(webhookMessages.endpointId, id)).run();
        return (
          db
            .delete(webhookEndpoints)
            .where(eq(webhookEndpoints.id, id))
            .returning({ id: webhookEndpoints.id })
            .all().length > 0
        );
      }, changed);
    },

    disableEndpoint(id) {
      return write(() => {
        db.update(webhookEndpoints).set({ enabled: false }).where(eq(webhookEndpoints.id, id)).run();
      }, changed);
    },

    listMessages: (endpointId, limit) =>
      read(() => {
        const messages = db
          .select()
          .from(webhookMessages)
          .where(eq(webhookMessages.endpointId, endpointId))
          .orderBy(desc(webhookMessages.createdAt), desc(webhookMessages.id))
          .limit(limit)
          .all();
        const attempts =
          messages.length === 0
            ? []
            : db
                .select()
                .from(webhookAttempts)
                .where(
                  inArray(
                    webhookAttempts.messageId,
                    messages.map((m) => m.id),
                  ),
                )
                .orderBy(webhookAttempts.n)
                .all();
        return messages.map((m) => ({
          id: m.id,
          endpointId: m.endpointId,
          type: m.type as ClaimedMessage['type'],
          createdAt: m.createdAt,
          status: m.status as 'pending' | 'delivered' | 'failed',
          attempts: attempts
            .filter((a) => a.messageId === m.id)
            .map(({ at, status, error }) => ({ at, status, error })),
        }));
      }),

    retryMessage(endpointId, messageId, now) {
      return write(
        () =>
          db
            .update(webhookMessages)
            .set({ status: 'pending', nextAttemptAt: now, settledAt: null })
            .where(and(eq(webhookMessages.id, messageId), eq(webhookMessages.endpointId, endpointId)))
            .returning({ id: webhookMessages.id })
            .all().length > 0,
      );
    },

    claimDue(now, leaseMs, limit) {
      // A read first: the poll of an idle outbox takes no write lock.
      if (anyDue.get(now) === null) return Promise.resolve([]);
      return write(() => {
        const due = db
          .update(webhookMessages)
          .set({ nextAttemptAt: now + leaseMs })
          .where(
            inArray(
              webhookMessages.id,
              db
                .select({ id: webhookMessages.id })
                .from(webhookMessages)
                .where(and(isNotNull(webhookMessages.nextAttemptAt), lte(webhookMessages.nextAttemptAt, now)))
                .orderBy(webhookMessages.nextAttemptAt)
                .limit(limit),
            ),
          )
          .returning()
          .all();
        const endpoints = new Map<string, StoredEndpoint | undefined>();
        for (const { endpointId } of due) {
          if (!endpoints.has(endpointId)) endpoints.set(endpointId, findEndpoint(endpointId));
        }
        return due.map((m) => ({
          id: m.id,
          type: m.type as ClaimedMessage['type'],
          body: m.body,
          createdAt: m.createdAt,
          attempts: m.attempts,
          endpoint: endpoints.get(m.endpointId),
        }));
      });
    },

    recordAttempts(records) {
      return write(() => {
        for (const { messageId, endpointId, attempt, at, result, outcome } of records) {
          const updated = settleAttempt.get(
            attempt,
            outcome.kind === 'retry' ? 'pending' : outcome.kind,
            outcome.kind === 'retry' ? outcome.retryAt : null,
            outcome.kind === 'retry' ? null : at,
            messageId,
            attempt - 1,
          );
          if (updated === null) continue;
          insertAttempt.run(messageId, attempt, result.at, result.status, result.error);
          if (endpointId === undefined) continue;
          if (outcome.kind === 'delivered') clearFailing.run(endpointId);
          else setFailing.run(at, endpointId);
        }
      });
    },

    dropMessage(messageId) {
      return write(() => {
        db.delete(webhookAttempts).where(eq(webhookAttempts.messageId, messageId)).run();
        db.delete(webhookMessages).where(eq(webhookMessages.id, messageId)).run();
      });
    },

    deleteSettledBefore(before, limit) {
      return write(() => {
        const gone = db
          .delete(webhookMessages)
          .where(
            inArray(
              webhookMessages.id,
              db
                .select({ id: webhookMessages.id })
                .from(webhookMessages)
                .where(and(isNotNull(webhookMessages.settledAt), lte(webhookMessages.settledAt, before)))
                .limit(limit),
            ),
          )
          .returning({ id: webhookMessages.id })
          .all();
        if (gone.length > 0) {
          db.delete(webhookAttempts)
            .where(
              inArray(
                webhookAttempts.messageId,
                gone.map((m) => m.id),
              ),
            )
            .run();
        }
        const marks = db
          .delete(webhookMarks)
          .where(
            inArray(
              webhookMarks.mark,
              db
                .select({ mark: webhookMarks.mark })
                .from(webhookMarks)
                .where(lte(webhookMarks.at, before))
                .limit(limit),
            ),
          )
          .returning({ mark: webhookMarks.mark })
          .all();
        return gone.length + marks.length;
      });
    },

    queueStats: () =>
      read(() => {
        const row = db
          .select({
            depth: sql<number>`count(*)`,
            oldest: sql<number | null>`min(${webhookMessages.createdAt})`,
          })
          .from(webhookMessages)
          .where(isNotNull(webhookMessages.nextAttemptAt))
          .get();
        return { depth: row?.depth ?? 0, oldestCreatedAt: row?.oldest ?? undefined };
      }),

    writeOnce(mark, at, minGapMs, messages) {
      return write(() => {
        const inserted =
          minGapMs === undefined
            ? db.insert(webhookMarks).values({ mark, at }).onConflictDoNothing().returning().all()
            : db
                .insert(webhookMarks)
                .values({ mark, at })
                .onConflictDoUpdate({
                  target: webhookMarks.mark,
                  set: { at },
                  setWhere: sql`${webhookMarks.at} <= ${at - minGapMs}`,
                })
                .returning()
                .all();
        if (inserted.length === 0) return false;
        writeOutbox(messages);
        return true;
      });
    },

    keysEnteringWindow: (now, leadMs, markPrefix, limit) =>
      read(() =>
        db
          .select(keyWithCredits)
          .from(apiKeys)
          .leftJoin(keyCredits, creditsOfKey)
          .where(
            and(
              sql`${apiKeys.expiresAt} > ${now}`,
              lte(apiKeys.expiresAt, now + leadMs),
              lte(apiKeys.createdAt, sql`${apiKeys.expiresAt} - ${leadMs}`),
              sql`NOT EXISTS (SELECT 1 FROM ${webhookMarks} WHERE ${webhookMarks.mark} = ${markPrefix} || ${apiKeys.id})`,
            ),
          )
          .orderBy(apiKeys.expiresAt)
          .limit(limit)
          .all()
          .map((row) => withCredits(row)),
      ),

    onEndpointsChanged(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },

    async close() {},
  };
}
