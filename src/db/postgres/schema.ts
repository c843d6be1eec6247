// The PostgreSQL schema, the same table as SQLite's. Change it here, then `bun run db:generate` writes
// the migration. Times are epoch milliseconds in bigint and the hash is hex text: Bun's SQL client has
// open bugs with timestamp and json columns, and drizzle 0.45 has no bytea column.
import { bigint, index, integer, pgTable, smallint, text } from 'drizzle-orm/pg-core';

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
  },
  (table) => [
    // Listing a user's keys newest first, keyset-paged on (created_at, id); the per-user cap counts a
    // user's live keys on it too (an index-only scan, expires_at being in it).
    index('api_keys_user_created').on(table.userId, table.createdAt, table.id, table.expiresAt),
    // The purge finds expired keys in order.
    index('api_keys_expires').on(table.expiresAt),
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
