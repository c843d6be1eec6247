// The WebhookStore on PostgreSQL, for any number of replicas on one database, and the outbox's insert
// that the key and policy stores run inside their own transactions. Replicas claim due messages with
// FOR UPDATE SKIP LOCKED, moving each one's next attempt forward by a lease, so each message goes to
// one sender at a time and a replica that dies leaves its messages to the others once the lease ends.
// A change to endpoints NOTIFYs the other replicas, which read their subscriptions again.
import { and, desc, eq, inArray, isNotNull, lte, sql } from 'drizzle-orm';
import type { EventType } from '../../webhooks/event-names';
import type { OutboxMessage } from '../../webhooks/events';
import type {
  ClaimedMessage,
  StoredEndpoint,
  WebhookChangedListener,
  WebhookStore,
} from '../../webhooks/store';
import { withCredits } from '../key-rows';
import type { PostgresDb } from './open';
import {
  apiKeys,
  keyCredits,
  webhookAttempts,
  webhookEndpoints,
  webhookMarks,
  webhookMessages,
} from './schema';
import { creditsOfKey, keyWithCredits } from './store';
import { unavailableOr } from './unavailable';

/** The NOTIFY channel: a payload is the sending replica's id. */
export const WEBHOOKS_CHANNEL = 'keygate_webhooks';

type Executor = { execute: PostgresDb['execute'] };

/** The outbox rows as one JSON parameter: one statement, whatever their number. */
const outboxJson = (messages: readonly OutboxMessage[]) =>
  JSON.stringify(
    messages.map((m) => ({
      id: m.id,
      endpoint_id: m.endpointId,
      type: m.type,
      body: m.body,
      created_at: m.createdAt,
    })),
  );

/** Inserts outbox messages in the caller's transaction. */
export async function insertOutbox(tx: Executor, messages: readonly OutboxMessage[]): Promise<void> {
  if (messages.length === 0) return;
  await tx.execute(sql`INSERT INTO webhook_messages (id, endpoint_id, type, body, created_at, status, attempts, next_attempt_at)
    SELECT id, endpoint_id, type, body, created_at, 'pending', 0, created_at
    FROM json_to_recordset(${outboxJson(messages)}::text::json)
      AS x(id text, endpoint_id text, type text, body text, created_at bigint)`);
}

/** The same rows as a JSON value, for a statement that inserts them itself (the batched creates). */
export const outboxParameter = (messages: readonly OutboxMessage[] | undefined) =>
  messages === undefined || messages.length === 0
    ? null
    : messages.map((m) => ({
        id: m.id,
        endpoint_id: m.endpointId,
        type: m.type,
        body: m.body,
        created_at: m.createdAt,
      }));

type EndpointRow = typeof webhookEndpoints.$inferSelect;
const endpointOf = (row: EndpointRow): StoredEndpoint => ({
  ...row,
  events: JSON.parse(row.events) as string[],
});

export async function createPostgresWebhookStore(
  db: PostgresDb,
  { listen }: { listen: boolean },
): Promise<WebhookStore> {
  const listeners = new Set<WebhookChangedListener>();
  const changed = () => {
    for (const listener of listeners) listener();
  };
  const replicaId = crypto.randomUUID();
  const transaction = <T>(
    work: (tx: Parameters<Parameters<PostgresDb['transaction']>[0]>[0]) => Promise<T>,
  ) =>
    db
      .transaction(async (tx) => {
        await tx.execute(sql`SET LOCAL synchronous_commit TO on`);
        return work(tx);
      })
      .catch(unavailableOr);
  /** A change to endpoints: committed with a NOTIFY, then told here. */
  const endpointsWrite = async <T>(
    work: (tx: Parameters<Parameters<PostgresDb['transaction']>[0]>[0]) => Promise<T>,
  ) => {
    const value = await transaction(async (tx) => {
      const result = await work(tx);
      await tx.execute(sql`SELECT pg_notify(${WEBHOOKS_CHANNEL}, ${replicaId})`);
      return result;
    });
    changed();
    return value;
  };
  let unlisten: (() => Promise<void>) | undefined;
  if (listen) {
    const subscription = await db.$client
      .listen(
        WEBHOOKS_CHANNEL,
        (payload) => {
          if (payload !== replicaId) changed();
        },
        // After a reconnect, changes meanwhile are unknown: read them all again.
        () => changed(),
      )
      .catch(unavailableOr);
    unlisten = () => subscription.unlisten();
  }

  return {
    async insertEndpoint(endpoint) {
      await endpointsWrite((tx) =>
        tx.insert(webhookEndpoints).values({ ...endpoint, events: JSON.stringify(endpoint.events) }),
      );
    },

    async listEndpoints() {
      const rows = await db
        .select()
        .from(webhookEndpoints)
        .orderBy(webhookEndpoints.createdAt)
        .catch(unavailableOr);
      return rows.map(endpointOf);
    },

    async findEndpoint(id) {
      const [row] = await db
        .select()
        .from(webhookEndpoints)
        .where(eq(webhookEndpoints.id, id))
        .catch(unavailableOr);
      return row === undefined ? undefined : endpointOf(row);
    },

    updateEndpoint(id, change) {
      const { events, ...rest } = change;
      const set = { ...rest, ...(events === undefined ? {} : { events: JSON.stringify(events) }) };
      return endpointsWrite(async (tx) => {
        const rows =
          Object.keys(set).length > 0
            ? await tx.update(webhookEndpoints).set(set).where(eq(webhookEndpoints.id, id)).returning()
            : await tx.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, id));
        return rows[0] === undefined ? undefined : endpointOf(rows[0]);
      });
    },

    async rotateSecret(id, secret, previousUntil) {
      const rows = await transaction((tx) =>
        tx
          .update(webhookEndpoints)
          .set({
            previousSecret: sql`${webhookEndpoints.secret}`,
            previousSecretUntil: previousUntil,
            secret,
          })
          .where(eq(webhookEndpoints.id, id))
          .returning({ id: webhookEndpoints.id }),
      );
      return rows.length > 0;
    },

    deleteEndpoint(id) {
      return endpointsWrite(async (tx) => {
        await tx.execute(
          sql`DELETE FROM ${webhookAttempts} WHERE ${webhookAttempts.messageId} IN (SELECT ${webhookMessages.id} FROM ${webhookMessages} WHERE ${webhookMessages.endpointId} = ${id})`,
        );
        await tx.delete(webhookMessages).where(eq(webhookMessages.endpointId, id));
        const gone = await tx
          .delete(webhookEndpoints)
          .where(eq(webhookEndpoints.id, id))
          .returning({ id: webhookEndpoints.id });
        return gone.length > 0;
      });
    },

    async disableEndpoint(id) {
      await endpointsWrite((tx) =>
        tx.update(webhookEndpoints).set({ enabled: false }).where(eq(webhookEndpoints.id, id)),
      );
    },

    async listMessages(endpointId, limit) {
      const messages = await db
        .select()
        .from(webhookMessages)
        .where(eq(webhookMessages.endpointId, endpointId))
        .orderBy(desc(webhookMessages.createdAt), desc(webhookMessages.id))
        .limit(limit)
        .catch(unavailableOr);
      const attempts =
        messages.length === 0
          ? []
          : await db
              .select()
              .from(webhookAttempts)
              .where(
                inArray(
                  webhookAttempts.messageId,
                  messages.map((m) => m.id),
                ),
              )
              .orderBy(webhookAttempts.n)
              .catch(unavailableOr);
      return messages.map((m) => ({
        id: m.id,
        endpointId: m.endpointId,
        type: m.type as EventType,
        createdAt: m.createdAt,
        status: m.status as 'pending' | 'delivered' | 'failed',
        attempts: attempts
          .filter((a) => a.messageId === m.id)
          .map(({ at, status, error }) => ({ at, status, error })),
      }));
    },

    async retryMessage(endpointId, messageId, now) {
      const rows = await transaction((tx) =>
        tx
          .update(webhookMessages)
          .set({ status: 'pending', nextAttemptAt: now, settledAt: null })
          .where(and(eq(webhookMessages.id, messageId), eq(webhookMessages.endpointId, endpointId)))
          .returning({ id: webhookMessages.id }),
      );
      return rows.length > 0;
    },

    async claimDue(now, leaseMs, limit) {
      // A read first: the poll of an idle outbox opens no transaction.
      const any = await db
        .execute(
          sql`SELECT 1 FROM ${webhookMessages} WHERE next_attempt_at IS NOT NULL AND next_attempt_at <= ${now} LIMIT 1`,
        )
        .catch(unavailableOr);
      if ([...any].length === 0) return [];
      const due = await transaction(async (tx) => {
        const rows = await tx.execute<{
          id: string;
          endpoint_id: string;
          type: string;
          body: string;
          created_at: string | number;
          attempts: number;
        }>(sql`UPDATE ${webhookMessages} SET next_attempt_at = ${now + leaseMs}
          WHERE id = ANY(ARRAY(SELECT id FROM ${webhookMessages}
            WHERE next_attempt_at IS NOT NULL AND next_attempt_at <= ${now}
            ORDER BY next_attempt_at LIMIT ${limit} FOR UPDATE SKIP LOCKED))
          RETURNING id, endpoint_id, type, body, created_at, attempts`);
        return [...rows];
      });
      if (due.length === 0) return [];
      const endpointIds = [...new Set(due.map((m) => m.endpoint_id))];
      const endpoints = new Map(
        (
          await db
            .select()
            .from(webhookEndpoints)
            .where(inArray(webhookEndpoints.id, endpointIds))
            .catch(unavailableOr)
        ).map((row) => [row.id, endpointOf(row)] as const),
      );
      return due.map(
        (m): ClaimedMessage => ({
          id: m.id,
          type: m.type as EventType,
          body: m.body,
          createdAt: Number(m.created_at),
          attempts: m.attempts,
          endpoint: endpoints.get(m.endpoint_id),
        }),
      );
    },

    async recordAttempts(records) {
      const input = JSON.stringify(
        records.map(({ messageId, attempt, at, result, outcome }) => ({
          id: messageId,
          attempt,
          status: outcome.kind === 'retry' ? 'pending' : outcome.kind,
          next: outcome.kind === 'retry' ? outcome.retryAt : null,
          settled: outcome.kind === 'retry' ? null : at,
          at: result.at,
          http: result.status,
          error: result.error,
        })),
      );
      await transaction(async (tx) => {
        // Every message of the batch and its attempt in one statement; an attempt another sender
        // recorded first (its lease had passed) matches no row and is not inserted.
        const recorded = await tx.execute<{ id: string }>(sql`WITH input AS (
            SELECT * FROM json_to_recordset(${input}::text::json) AS x(id text, attempt integer, status text,
              next bigint, settled bigint, at bigint, http integer, error text)
          ), updated AS (
            UPDATE ${webhookMessages} m SET attempts = i.attempt, status = i.status, next_attempt_at = i.next,
              settled_at = i.settled
            FROM input i WHERE m.id = i.id AND m.attempts = i.attempt - 1 RETURNING m.id
          )
          INSERT INTO ${webhookAttempts} (message_id, n, at, status, error)
          SELECT i.id, i.attempt, i.at, i.http, i.error FROM input i JOIN updated u ON u.id = i.id
          RETURNING message_id AS id`);
        const done = new Set([...recorded].map((row) => row.id));
        for (const { messageId, endpointId, at, outcome } of records) {
          if (endpointId === undefined || !done.has(messageId)) continue;
          await tx
            .update(webhookEndpoints)
            .set({
              failingSince:
                outcome.kind === 'delivered' ? null : sql`coalesce(${webhookEndpoints.failingSince}, ${at})`,
            })
            .where(eq(webhookEndpoints.id, endpointId));
        }
      });
    },

    async dropMessage(messageId) {
      await transaction(async (tx) => {
        await tx.delete(webhookAttempts).where(eq(webhookAttempts.messageId, messageId));
        await tx.delete(webhookMessages).where(eq(webhookMessages.id, messageId));
      });
    },

    deleteSettledBefore(before, limit) {
      return transaction(async (tx) => {
        const gone = await tx.execute<{ id: string }>(sql`DELETE FROM ${webhookMessages} WHERE id = ANY(ARRAY(
          SELECT id FROM ${webhookMessages} WHERE settled_at IS NOT NULL AND settled_at <= ${before}
          LIMIT ${limit} FOR UPDATE SKIP LOCKED)) RETURNING id`);
        const ids = [...gone].map((row) => row.id);
        if (ids.length > 0) await tx.delete(webhookAttempts).where(inArray(webhookAttempts.messageId, ids));
        const marks = await tx.execute<{
          mark: string;
        }>(sql`DELETE FROM ${webhookMarks} WHERE mark = ANY(ARRAY(
          SELECT mark FROM ${webhookMarks} WHERE at <= ${before} LIMIT ${limit} FOR UPDATE SKIP LOCKED)) RETURNING mark`);
        return ids.length + [...marks].length;
      });
    },

    async queueStats() {
      const [row] = await db
        .select({
          depth: sql<number>`count(*)::int`,
          oldest: sql<string | null>`min(${webhookMessages.createdAt})`,
        })
        .from(webhookMessages)
        .where(isNotNull(webhookMessages.nextAttemptAt))
        .catch(unavailableOr);
      return {
        depth: row?.depth ?? 0,
        oldestCreatedAt: row?.oldest == null ? undefined : Number(row.oldest),
      };
    },

    writeOnce(mark, at, minGapMs, messages) {
      return transaction(async (tx) => {
        const inserted =
          minGapMs === undefined
            ? await tx.insert(webhookMarks).values({ mark, at }).onConflictDoNothing().returning()
            : await tx
                .insert(webhookMarks)
                .values({ mark, at })
                .onConflictDoUpdate({
                  target: webhookMarks.mark,
                  set: { at },
                  setWhere: sql`${webhookMarks.at} <= ${at - minGapMs}`,
                })
                .returning();
        if (inserted.length === 0) return false;
        await insertOutbox(tx, messages);
        return true;
      });
    },

    async keysEnteringWindow(now, leadMs, markPrefix, limit) {
      const rows = await db
        .select(keyWithCredits)
        .from(apiKeys)
        .leftJoin(keyCredits, creditsOfKey)
        .where(
          and(
            sql`${apiKeys.expiresAt} > ${now}`,
            lte(apiKeys.expiresAt, now + leadMs),
            sql`${apiKeys.createdAt} <= ${apiKeys.expiresAt} - ${leadMs}`,
            sql`NOT EXISTS (SELECT 1 FROM ${webhookMarks} WHERE ${webhookMarks.mark} = ${markPrefix} || ${apiKeys.id})`,
          ),
        )
        .orderBy(apiKeys.expiresAt)
        .limit(limit)
        .catch(unavailableOr);
      // The hash never leaves here: key info never shows it, and events are built from key info.
      return rows.map((row) => withCredits({ ...row, secretHash: new Uint8Array() }));
    },

    onEndpointsChanged(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },

    async close() {
      await unlisten?.().catch(() => undefined);
    },
  };
}
