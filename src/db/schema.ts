// The database schema. Change it here, then `bun run db:generate` writes the migration.
import { blob, index, integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';

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
  },
  (table) => [
    // Listing a user's keys newest first, keyset-paged on (created_at, id), walks this index; so does
    // counting a user's live keys at the cap, which reads expires_at from it. One per-user index, not
    // two: each insert lands on one random leaf page fewer (bench/HISTORY.md).
    index('api_keys_user_created').on(table.userId, table.createdAt, table.id, table.expiresAt),
    // The purge finds expired keys in order without scanning the table.
    index('api_keys_expires').on(table.expiresAt),
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
