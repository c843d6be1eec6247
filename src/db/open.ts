// Opens the SQLite database: the one place for pragmas, and the migrations applied before any use.
import { Database } from 'bun:sqlite';
import { closeSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import { type BunSQLiteDatabase, drizzle } from 'drizzle-orm/bun-sqlite';
import type { MigrationMeta } from 'drizzle-orm/migrator';
import { embeddedMigrations } from './migrations.macro' with { type: 'macro' };
import * as schema from './schema';

export type Db = BunSQLiteDatabase<typeof schema> & { $client: Database };

const MIGRATIONS: MigrationMeta[] = embeddedMigrations();

/** At start (pragmas, migrations) a statement may wait this long for another process's lock. */
export const STARTUP_BUSY_TIMEOUT_MS = 2000;

/**
 * While serving, the longest a statement waits for a lock inside SQLite. bun:sqlite is synchronous,
 * so such a wait stops every other request; writes wait for the write lock off the event loop
 * instead (GroupCommitWriter retries, up to WRITE_LOCK_WAIT_MS).
 */
export const BUSY_TIMEOUT_MS = 5;

export function openDatabase(url: string): Db {
  if (url !== ':memory:') {
    // Private whatever the umask: another local user must not replace jwt-secret or read the keys.
    // A directory that already exists is left as it is (its owner chose its mode).
    mkdirSync(dirname(url), { recursive: true, mode: 0o700 });
    createPrivately(url);
  }
  const client = new Database(url, { create: true, strict: true });
  // busy_timeout first: the pragmas below may themselves need a lock another process holds.
  client.run(`PRAGMA busy_timeout = ${STARTUP_BUSY_TIMEOUT_MS}`);
  client.run('PRAGMA journal_mode = WAL');
  // FULL: a commit returns only once the WAL is on disk, so an acknowledged write survives a crash.
  client.run('PRAGMA synchronous = FULL');
  client.run('PRAGMA foreign_keys = ON');
  assertWritable(client);
  const db = drizzle({ client, schema });
  migrate(db);
  client.run(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  return db;
}

/**
 * Creates the database file 0600 if it does not exist yet. SQLite would create it 0644 minus the
 * umask (0666 under umask 000), and gives the -wal and -shm files the database file's mode.
 * Any failure is left for SQLite to report in its own words.
 */
function createPrivately(path: string): void {
  try {
    closeSync(openSync(path, 'wx', 0o600));
  } catch {}
}

/**
 * SQLite opens a write-protected file read-only without a word: keygate would start, then fail
 * every write. A change made and rolled back at once proves the file can be written.
 */
function assertWritable(client: Database): void {
  const { user_version } = client.query('PRAGMA user_version').get() as { user_version: number };
  client.run('BEGIN IMMEDIATE');
  try {
    client.run(`PRAGMA user_version = ${user_version}`);
  } catch (error) {
    throw new Error(`the database file is read-only (${(error as Error).message})`);
  } finally {
    client.run('ROLLBACK');
  }
}

/** Applies every embedded migration not applied yet; running it again is a no-op. */
export function migrate(db: Db): void {
  // drizzle's own migrate() reads the folder at run time; the dialect's migrate takes the list we embedded.
  // Both members are internal to drizzle-orm (pinned); test/db/database.test.ts migrates a fresh database twice.
  const internals = db as unknown as {
    dialect: {
      migrate(migrations: MigrationMeta[], session: unknown, config: { migrationsFolder: string }): void;
    };
    session: unknown;
  };
  internals.dialect.migrate(MIGRATIONS, internals.session, { migrationsFolder: 'embedded' });
}

export function appliedMigrationCount(db: Db): number {
  const row = db.$client.query('SELECT count(*) AS n FROM __drizzle_migrations').get() as { n: number };
  return row.n;
}
