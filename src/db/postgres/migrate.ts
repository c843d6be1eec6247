// Applies the embedded PostgreSQL migrations once, however many replicas start together: drizzle's
// migrator takes no lock (two replicas race on CREATE SCHEMA and crash), so a session advisory lock
// lets one replica migrate while the others wait and then find nothing left to do. Lock and migration
// share one reserved connection, so a pool of one connection cannot deadlock on itself.
import type { SQL } from 'bun';
import { drizzle } from 'drizzle-orm/bun-sql';
import type { MigrationMeta } from 'drizzle-orm/migrator';

/** An arbitrary constant of keygate's, so the lock does not collide with other advisory locks. */
export const MIGRATION_LOCK_ID = 0x6b657967; // "keyg"

export async function migrateUnderLock(client: SQL, migrations: MigrationMeta[]): Promise<void> {
  const connection = await client.reserve();
  try {
    await connection`SELECT pg_advisory_lock(${MIGRATION_LOCK_ID})`;
    try {
      const db = drizzle({ client: connection as unknown as SQL });
      // Both members are internal to drizzle-orm (pinned); the tests migrate a fresh database twice.
      const internals = db as unknown as {
        dialect: {
          migrate(m: MigrationMeta[], session: unknown, config: { migrationsFolder: string }): Promise<void>;
        };
        session: unknown;
      };
      await internals.dialect.migrate(migrations, internals.session, { migrationsFolder: 'embedded' });
    } finally {
      await connection`SELECT pg_advisory_unlock(${MIGRATION_LOCK_ID})`;
    }
  } finally {
    connection.release();
  }
}
