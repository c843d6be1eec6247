// The PostgreSQL schema, the same table as SQLite's. Change it here, then `bun run db:generate` writes
// the migration. Times are epoch milliseconds in bigint and the hash is hex text: Bun's SQL client has
// open bugs with timestamp and json columns, and drizzle 0.45 has no bytea column.
import { sql } from 'drizzle-orm';
import {
  bigint,
  bigserial,
  boolean,
  index,
  integer,
  pgTable,
  primaryKey,
  smallint,
  text,
  uniqueIndex,
} from 'drizzle-orm/pg-core';

export const apiKeys = pgTable(
  'api_keys',
  {
    id: text('id').primaryKey(),
    // SHA-256 of the secret, as 64 hex digits: the secret itself is never stored.
    secretHash: text('secret_hash').notNull(),
    userId: bigint('user_id', { mode: 'number' }).notNull(),
    level: smallint('level').notNull(),
    name: text('name').notNull(),
    createdAt: bigint('created_at', { mode: 'number' }).notNull(),
    expiresAt: bigint('expires_at', { mode: 'number' }).notNull(),
    // The first key of its rotation chain, whose rate limit and credits it shares; null: its own id.
    lineage: text('lineage'),
    // When it was rotated out: it is retiring until it expires (it may no longer act on keys).
    rotatedAt: bigint('rotated_at', { mode: 'number' }),
    enabled: boolean('enabled').notNull().default(true),
    // The owner's metadata, as compact JSON text (Bun's SQL client has open bugs with json columns).
    meta: text('meta'),
    ratelimitLimit: integer('ratelimit_limit'),
    ratelimitDuration: integer('ratelimit_duration'),
    lastUsedAt: bigint('last_used_at', { mode: 'number' }),
    // What the key may do (a JSON array of permission names, wildcards allowed); null: none.
    permissions: text('permissions'),
    // Where it may be used from (a JSON array of addresses and CIDR blocks); null: anywhere.
    allowedIps: text('allowed_ips'),
    // When its secret was first reported leaked (ms), and by whom (leaks/service.ts); null: never.
    leakedAt: bigint('leaked_at', { mode: 'number' }),
    leakSource: text('leak_source'),
  },
  (table) => [
    // Listing a user's keys newest first, keyset-paged on (created_at, id); the per-user cap counts a
    // user's live keys on it too (an index-only scan, expires_at being in it).
    index('api_keys_user_created').on(table.userId, table.createdAt, table.id, table.expiresAt),
    // The purge finds expired keys in order.
    index('api_keys_expires').on(table.expiresAt),
    // The other keys of a rotation chain, asked when one goes: its credits go with the last of them.
    index('api_keys_lineage').on(table.lineage).where(sql`${table.lineage} IS NOT NULL`),
    // A leaked secret names no key: its key is found by the secret's hash alone.
    index('api_keys_secret_hash').on(table.secretHash),
    // The operator's list of every key, newest first, keyset-paged on (created_at, id). created_at
    // only grows, so each insert lands on the index's last page.
    index('api_keys_created').on(table.createdAt, table.id),
    // The operator's search by key id prefix (id LIKE 'kg_…%'): the primary key's order follows the
    // database's collation, which need not keep a prefix's ids together; text_pattern_ops compares
    // bytes. Ids start with their creation time, so inserts land on its last page too.
    index('api_keys_id_prefix').on(table.id.op('text_pattern_ops')),
  ],
);

/**
 * How many rows each user has in api_keys, live or expired but not yet purged (so never fewer than
 * their live keys). Triggers on api_keys keep it in step in the writing transaction (migration 0001),
 * whoever writes; a create locks its user's row, which serialises that user's creates on every
 * replica, and counts the live keys exactly only once this reaches MAX_KEYS_PER_USER.
 */
export const userKeyCounts = pgTable('user_key_counts', {
  userId: bigint('user_id', { mode: 'number' }).primaryKey(),
  keys: integer('keys').notNull(),
});

/**
 * A key's credits, one pool per rotation chain (`lineage`): during a grace period the old and the new
 * key draw on the same row. `refilledAt` anchors the refill clock (ms).
 */
export const keyCredits = pgTable('key_credits', {
  lineage: text('lineage').primaryKey(),
  remaining: bigint('remaining', { mode: 'number' }).notNull(),
  refillAmount: bigint('refill_amount', { mode: 'number' }),
  refillIntervalMs: bigint('refill_interval_ms', { mode: 'number' }),
  refilledAt: bigint('refilled_at', { mode: 'number' }).notNull(),
  // What the credits were last set to, and when (the refill anchor then): a credit cycle that began
  // at setAt began with setRemaining, a later one with the refill amount (webhooks' key.credits_low).
  setRemaining: bigint('set_remaining', { mode: 'number' }),
  setAt: bigint('set_at', { mode: 'number' }),
});

/** Verification counts per key and UTC hour (`bucket`, ms), written in batches. */
export const keyUsage = pgTable(
  'key_usage',
  {
    keyId: text('key_id').notNull(),
    bucket: bigint('bucket', { mode: 'number' }).notNull(),
    valid: bigint('valid', { mode: 'number' }).notNull().default(0),
    rateLimited: bigint('rate_limited', { mode: 'number' }).notNull().default(0),
    usageExceeded: bigint('usage_exceeded', { mode: 'number' }).notNull().default(0),
    denied: bigint('denied', { mode: 'number' }).notNull().default(0),
  },
  (table) => [
    primaryKey({ columns: [table.keyId, table.bucket] }),
    // Retention removes old hours in order.
    index('key_usage_bucket').on(table.bucket),
  ],
);

/**
 * Every verify and forward-auth answer that carried a code (keys' and tokens', unknown keys' too),
 * per UTC hour (`bucket`, ms) and code, for the operator's overview. Each replica's usage flush adds
 * its counts; removed with usage retention.
 */
export const verificationCounts = pgTable(
  'verification_counts',
  {
    bucket: bigint('bucket', { mode: 'number' }).notNull(),
    code: text('code').notNull(),
    count: bigint('count', { mode: 'number' }).notNull(),
  },
  (table) => [primaryKey({ columns: [table.bucket, table.code] })],
);

/**
 * Keys created (rotations included) per UTC hour (`bucket`, ms), counted in the create's own
 * transaction, so a key deleted since stays counted. A transaction adds to the row of its
 * connection's `shard` (backend pid % 8): concurrent create batches (several lanes, several
 * replicas) then seldom wait for one another's row lock until COMMIT. A reader sums the shards.
 */
export const keyCreations = pgTable(
  'key_creations',
  {
    bucket: bigint('bucket', { mode: 'number' }).notNull(),
    shard: smallint('shard').notNull().default(0),
    count: bigint('count', { mode: 'number' }).notNull(),
  },
  (table) => [primaryKey({ columns: [table.bucket, table.shard] })],
);

/** With JWT_USER_IDS=mapped: keygate's own user id for each (issuer, subject) pair, never reused. */
export const subjects = pgTable(
  'subjects',
  {
    userId: bigserial('user_id', { mode: 'number' }).primaryKey(),
    issuer: text('issuer').notNull(),
    subject: text('subject').notNull(),
  },
  (table) => [uniqueIndex('subjects_issuer_subject').on(table.issuer, table.subject)],
);

/** Facts about the database itself, such as the user-id mode it was started in. */
export const settings = pgTable('settings', {
  name: text('name').primaryKey(),
  value: text('value').notNull(),
});

/**
 * The operator's policy of a user: a rate limit all of the user's keys share, the most live keys
 * (instead of MAX_KEYS_PER_USER) and the highest level of the user's keys; null: none. A row exists
 * only while the user has a policy. Its credits, one pool for all of the user's keys, are in
 * user_credits. A create reads max_keys under its user's user_key_counts lock, so the cap is exact
 * across replicas.
 */
export const userPolicies = pgTable('user_policies', {
  userId: bigint('user_id', { mode: 'number' }).primaryKey(),
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
export const userCredits = pgTable('user_credits', {
  userId: bigint('user_id', { mode: 'number' }).primaryKey(),
  remaining: bigint('remaining', { mode: 'number' }).notNull(),
  refillAmount: bigint('refill_amount', { mode: 'number' }),
  refillIntervalMs: bigint('refill_interval_ms', { mode: 'number' }),
  refilledAt: bigint('refilled_at', { mode: 'number' }).notNull(),
});

/**
 * The console's one-time codes (`kind` 'code', valid five minutes, taken once) and sessions (`kind`
 * 'session'), each by the SHA-256 (hex) of its random token: the token itself is never stored.
 * `userId` null is an operator session; `by` names who started it (audit lines); a code carries the
 * `sessionSeconds` its session will last.
 */
export const consoleSessions = pgTable(
  'console_sessions',
  {
    tokenHash: text('token_hash').primaryKey(),
    kind: text('kind', { enum: ['code', 'session'] }).notNull(),
    userId: bigint('user_id', { mode: 'number' }),
    level: smallint('level').notNull(),
    by: text('by').notNull(),
    sessionSeconds: integer('session_seconds').notNull(),
    expiresAt: bigint('expires_at', { mode: 'number' }).notNull(),
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
export const webhookEndpoints = pgTable('webhook_endpoints', {
  id: text('id').primaryKey(),
  url: text('url').notNull(),
  events: text('events').notNull(),
  description: text('description'),
  enabled: boolean('enabled').notNull().default(true),
  secret: text('secret').notNull(),
  // The secret replaced by the latest rotation, still signed with until previousSecretUntil (ms).
  previousSecret: text('previous_secret'),
  previousSecretUntil: bigint('previous_secret_until', { mode: 'number' }),
  createdAt: bigint('created_at', { mode: 'number' }).notNull(),
  // The first failed attempt since the last delivery; three days of failures disable the endpoint.
  failingSince: bigint('failing_since', { mode: 'number' }),
});

/**
 * The outbox: one row per event and subscribed endpoint, written in the transaction of the change
 * that caused it. `id` is its webhook-id. A pending message is due at `nextAttemptAt`; a replica that
 * claims it (FOR UPDATE SKIP LOCKED) moves that forward by its lease, so a replica that dies leaves it
 * to the others.
 */
export const webhookMessages = pgTable(
  'webhook_messages',
  {
    id: text('id').primaryKey(),
    endpointId: text('endpoint_id').notNull(),
    type: text('type').notNull(),
    body: text('body').notNull(),
    createdAt: bigint('created_at', { mode: 'number' }).notNull(),
    // pending | delivered | failed
    status: text('status').notNull().default('pending'),
    attempts: integer('attempts').notNull().default(0),
    // Null once delivered or failed.
    nextAttemptAt: bigint('next_attempt_at', { mode: 'number' }),
    // When it was delivered or given up (retention counts from it).
    settledAt: bigint('settled_at', { mode: 'number' }),
  },
  (table) => [
    index('webhook_messages_due').on(table.nextAttemptAt).where(sql`${table.nextAttemptAt} IS NOT NULL`),
    index('webhook_messages_endpoint').on(table.endpointId, table.createdAt),
    index('webhook_messages_settled').on(table.settledAt).where(sql`${table.settledAt} IS NOT NULL`),
  ],
);

/** Each attempt to deliver a message: its HTTP status, or the sentence saying why there was none. */
export const webhookAttempts = pgTable(
  'webhook_attempts',
  {
    messageId: text('message_id').notNull(),
    n: integer('n').notNull(),
    at: bigint('at', { mode: 'number' }).notNull(),
    status: integer('status'),
    error: text('error'),
  },
  (table) => [primaryKey({ columns: [table.messageId, table.n] })],
);

/**
 * What the derived events have been sent for (`key.expiring` at a lead time, `key.rate_limited` in
 * its minute): a mark is inserted in the transaction that writes the event's messages, once,
 * whichever replica gets there first.
 */
export const webhookMarks = pgTable(
  'webhook_marks',
  {
    mark: text('mark').primaryKey(),
    at: bigint('at', { mode: 'number' }).notNull(),
  },
  (table) => [index('webhook_marks_at').on(table.at)],
);
