// Opens PostgreSQL through Bun's built-in SQL client: one pool (DATABASE_POOL_SIZE connections),
// drizzle over it, and the embedded migrations applied under an advisory lock before any use.
import { SQL } from 'bun';
import { type BunSQLDatabase, drizzle } from 'drizzle-orm/bun-sql';
import type { MigrationMeta } from 'drizzle-orm/migrator';
import { embeddedPostgresMigrations } from '../migrations.macro' with { type: 'macro' };
import { migrateUnderLock } from './migrate';
import * as schema from './schema';

export type PostgresDb = BunSQLDatabase<typeof schema> & { $client: SQL };

const MIGRATIONS: MigrationMeta[] = embeddedPostgresMigrations();

export async function openPostgres(url: string, poolSize: number): Promise<PostgresDb> {
  const client = new SQL(url, {
    max: poolSize,
    // Give up on a connection attempt quickly: requests answer 503 rather than wait while it is down.
    connectionTimeout: 5,
    idleTimeout: 60,
  });
  const db = drizzle({ client, schema }) as PostgresDb;
  await migrateUnderLock(client, MIGRATIONS);
  return db;
}

/** How many migrations the database has applied. */
export async function appliedPostgresMigrationCount(db: PostgresDb): Promise<number> {
  const [row] = await db.$client`SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations`;
  return (row as { n: number }).n;
}
