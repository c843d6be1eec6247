// The database schema. Change it here, then `bun run db:generate` writes the migration.
import { sql } from 'drizzle-orm';
import { blob, index, integer, primaryKey, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core';

export const apiKeys = sqliteTable(
  'api_keys',
  {
    id: text('id').primaryKey(),
    // SHA-256 of the secret: the secret itself is never stored.
    secretHash: blob('secret_hash', { mode: 'buffer' }).notNull(),
    userId: integer('user_id').notNull(),
    level: integer('level').notNull(),
    name: text('name').notNull(),
    createdAt: integer('created_at').notNull(),
    expiresAt: integer('expires_at').notNull(),
    // The first key of its rotation chain, whose rate limit and credits it shares; null: its own id.
    lineage: text('lineage'),
    // When it was rotated out: it is retiring until it expires (it may no longer act on keys).
    rotatedAt: integer('rotated_at'),
    enabled: integer('enabled', { mode: 'boolean' }).notNull().default(true),
    // The owner's metadata, as compact JSON text.
    meta: text('meta'),
    ratelimitLimit: integer('ratelimit_limit'),
    ratelimitDuration: integer('ratelimit_duration'),
    lastUsedAt: integer('last_used_at'),
    // What the key may do (a JSON array of permission names, wildcards allowed); null: none.
    permissions: text('permissions'),
    // Where it may be used from (a JSON array of addresses and CIDR blocks); null: anywhere.
    allowedIps: text('allowed_ips'),
    // When its secret was first reported leaked (ms), and by whom (leaks/service.ts); null: never.
    leakedAt: integer('leaked_at'),
    leakSource: text('leak_source'),
  },
  (table) => [
    // Listing a user's keys newest first, keyset-paged on (created_at, id), walks this index; so does
    // counting a user's live keys at the cap, which reads expires_at from it. One per-user index, not
    // two: each insert lands on one random leaf page fewer (bench/HISTORY.md).
    index('api_keys_user_created').on(table.userId, table.createdAt, table.id, table.expiresAt),
    // The purge finds expired keys in order without scanning the table.
    index('api_keys_expires').on(table.expiresAt),
    // The other keys of a rotation chain, asked when one goes: its credits go with the last of them.
    index('api_keys_lineage').on(table.lineage).where(sql`${table.lineage} IS NOT NULL`),
    // A leaked secret names no key: its key is found by the secret's hash alone.
    index('api_keys_secret_hash').on(table.secretHash),
    // The operator's list of every key, newest first, keyset-paged on (created_at, id). created_at
    // only grows, so each insert lands on the index's last page.
    index('api_keys_created').on(table.createdAt, table.id),
  ],
);

export type ApiKeyRow = typeof apiKeys.$inferSelect;

/**
 * How many rows each user has in api_keys, live or expired but not yet purged (so never fewer than
 * their live keys). Kept in step by triggers on api_keys (drizzle/0005, written by hand), within the
 * statement that inserts or deletes, whoever runs it: a create counts a user's live keys exactly only
 * once this reaches MAX_KEYS_PER_USER.
 */
export const userKeyCounts = sqliteTable('user_key_counts', {
  userId: integer('user_id').primaryKey(),
  keys: integer('keys').notNull(),
});

/**
 * A key's credits, one pool per rotation chain (`lineage`): during a grace period the old and the new
 * key draw on the same row. `refilledAt` anchors the refill clock (ms).
 */
export const keyCredits = sqliteTable('key_credits', {
  lineage: text('lineage').primaryKey(),
  remaining: integer('remaining').notNull(),
  refillAmount: integer('refill_amount'),
  refillIntervalMs: integer('refill_interval_ms'),
  refilledAt: integer('refilled_at').notNull(),
  // What the credits were last set to, and when (the refill anchor then): a credit cycle that began
  // at setAt began with setRemaining, a later one with the refill amount (webhooks' key.credits_low).
  setRemaining: integer('set_remaining'),
  setAt: integer('set_at'),
});

/** Verification counts per key and UTC hour (`bucket`, ms), written in batches. */
export const keyUsage = sqliteTable(
  'key_usage',
  {
    keyId: text('key_id').notNull(),
    bucket: integer('bucket').notNull(),
    valid: integer('valid').notNull().default(0),
    rateLimited: integer('rate_limited').notNull().default(0),
    usageExceeded: integer('usage_exceeded').notNull().default(0),
    denied: integer('denied').notNull().default(0),
  },
  (table) => [
    primaryKey({ columns: [table.keyId, table.bucket] }),
    // Retention removes old hours in order.
    index('key_usage_bucket').on(table.bucket),
  ],
);

/**
 * Every verify and forward-auth answer that carried a code (keys' and tokens', unknown keys' too),
 * per UTC hour (`bucket`, ms) and code, for the operator's overview. Written with the usage flush;
 * removed with usage retention.
 */
export const verificationCounts = sqliteTable(
  'verification_counts',
  {
    bucket: integer('bucket').notNull(),
    code: text('code').notNull(),
    count: integer('count').notNull(),
  },
  (table) => [primaryKey({ columns: [table.bucket, table.code] })],
);

/**
 * Keys created (rotations included) per UTC hour (`bucket`, ms), counted in the create's own
 * transaction, so a key deleted since stays counted. `shard` spreads concurrent transactions over a
 * few rows on PostgreSQL (SQLite has one writer and always writes 0); a reader sums them.
 */
export const keyCreations = sqliteTable(
  'key_creations',
  {
    bucket: integer('bucket').notNull(),
    shard: integer('shard').notNull().default(0),
    count: integer('count').notNull(),
  },
  (table) => [primaryKey({ columns: [table.bucket, table.shard] })],
);

/** With JWT_USER_IDS=mapped: keygate's own user id for each (issuer, subject) pair, never reused. */
export const subjects = sqliteTable(
  'subjects',
  {
    userId: integer('user_id').primaryKey({ autoIncrement: true }),
    issuer: text('issuer').notNull(),
    subject: text('subject').notNull(),
  },
  (table) => [uniqueIndex('subjects_issuer_subject').on(table.issuer, table.subject)],
);

/** Facts about the database itself, such as the user-id mode it was started in. */
export const settings = sqliteTable('settings', {
  name: text('name').primaryKey(),
  value: text('value').notNull(),
});

/**
 * The operator's policy of a user: a rate limit all of the user's keys share, the most live keys
 * (instead of MAX_KEYS_PER_USER) and the highest level of the user's keys; null: none. A row exists
 * only while the user has a policy. Its credits, one pool for all of the user's keys, are in
 * user_credits.
 */
export const userPolicies = sqliteTable('user_policies', {
  userId: integer('user_id').primaryKey(),
  ratelimitLimit: integer('ratelimit_limit'),
  ratelimitDuration: integer('ratelimit_duration'),
  maxKeys: integer('max_keys'),
  maxLevel: integer('max_level'),
  // The permissions the user's keys may hold (a JSON array, wildcards allowed); null: any.
  permissions: text('permissions'),
});

/**
 * A user's policy's credits, one pool shared by all of the user's keys, stored as key_credits are
 * (the same columns, so the guarded take of db/credits-take.ts takes from it as from a key's).
 */
export const userCredits = sqliteTable('user_credits', {
  userId: integer('user_id').primaryKey(),
  remaining: integer('remaining').notNull(),
  refillAmount: integer('refill_amount'),
  refillIntervalMs: integer('refill_interval_ms'),
  refilledAt: integer('refilled_at').notNull(),
});

/**
 * The console's one-time codes (`kind` 'code', valid five minutes, taken once) and sessions (`kind`
 * 'session'), each by the SHA-256 of its random token: the token itself is never stored. `userId`
 * null is an operator session; `by` names who started it (audit lines); a code carries the
 * `sessionSeconds` its session will last.
 */
export const consoleSessions = sqliteTable(
  'console_sessions',
  {
    tokenHash: text('token_hash').primaryKey(),
    kind: text('kind', { enum: ['code', 'session'] }).notNull(),
    userId: integer('user_id'),
    level: integer('level').notNull(),
    by: text('by').notNull(),
    sessionSeconds: integer('session_seconds').notNull(),
    expiresAt: integer('expires_at').notNull(),
  },
  (table) => [
    // Revoke-all ends a user's sessions; expired rows are removed in order.
    index('console_sessions_user').on(table.userId),
    index('console_sessions_expires').on(table.expiresAt),
  ],
);

/**
 * The operator's webhook endpoints. `secret` and `previousSecret` are the signing secrets as
 * given (`whsec_…`): the sender must sign with them, so unlike a key's secret they are kept, not
 * hashed (docs/security.md). `events` is a JSON array of event names, or ["*"].
 */
export const webhookEndpoints = sqliteTable('webhook_endpoints', {
  id: text('id').primaryKey(),
  url: text('url').notNull(),
  events: text('events').notNull(),
  description: text('description'),
  enabled: integer('enabled', { mode: 'boolean' }).notNull().default(true),
  secret: text('secret').notNull(),
  // The secret replaced by the latest rotation, still signed with until previousSecretUntil (ms).
  previousSecret: text('previous_secret'),
  previousSecretUntil: integer('previous_secret_until'),
  createdAt: integer('created_at').notNull(),
  // The first failed attempt since the last delivery; three days of failures disable the endpoint.
  failingSince: integer('failing_since'),
});

/**
 * The outbox: one row per event and subscribed endpoint, written in the transaction of the change
 * that caused it. `id` is its webhook-id. A pending message is due at `nextAttemptAt`; a sender that
 * claims it moves that forward by its lease, so a sender that dies leaves it to the others.
 */
export const webhookMessages = sqliteTable(
  'webhook_messages',
  {
    id: text('id').primaryKey(),
    endpointId: text('endpoint_id').notNull(),
    type: text('type').notNull(),
    body: text('body').notNull(),
    createdAt: integer('created_at').notNull(),
    // pending | delivered | failed
    status: text('status').notNull().default('pending'),
    attempts: integer('attempts').notNull().default(0),
    // Null once delivered or failed.
    nextAttemptAt: integer('next_attempt_at'),
    // When it was delivered or given up (retention counts from it).
    settledAt: integer('settled_at'),
  },
  (table) => [
    // The sender finds due messages in order without scanning delivered ones.
    index('webhook_messages_due').on(table.nextAttemptAt).where(sql`${table.nextAttemptAt} IS NOT NULL`),
    // An endpoint's messages, latest first.
    index('webhook_messages_endpoint').on(table.endpointId, table.createdAt),
    // Retention removes settled messages in order.
    index('webhook_messages_settled').on(table.settledAt).where(sql`${table.settledAt} IS NOT NULL`),
  ],
);

/** Each attempt to deliver a message: its HTTP status, or the sentence saying why there was none. */
export const webhookAttempts = sqliteTable(
  'webhook_attempts',
  {
    messageId: text('message_id').notNull(),
    n: integer('n').notNull(),
    at: integer('at').notNull(),
    status: integer('status'),
    error: text('error'),
  },
  (table) => [primaryKey({ columns: [table.messageId, table.n] })],
);

/**
 * What the derived events have been sent for (`key.expiring` at a lead time, a credit cycle's
 * `key.credits_low`, `key.rate_limited` in its minute): a mark is inserted in the transaction that
 * writes the event's messages, once, whichever replica gets there first.
 */
export const webhookMarks = sqliteTable(
  'webhook_marks',
  {
    mark: text('mark').primaryKey(),
    at: integer('at').notNull(),
  },
  (table) => [index('webhook_marks_at').on(table.at)],
);
