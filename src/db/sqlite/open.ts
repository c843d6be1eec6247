// Opens the SQLite database: the one place for pragmas, and the migrations applied before any use.
import { Database } from 'bun:sqlite';
import { closeSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import { type BunSQLiteDatabase, drizzle } from 'drizzle-orm/bun-sqlite';
import type { MigrationMeta } from 'drizzle-orm/migrator';
import { embeddedMigrations } from '../migrations.macro' with { type: 'macro' };
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

/**
 * A data directory keygate creates is the owner's alone (whatever the umask), so no other local user
 * can replace `jwt-secret` or the database in it. An existing directory is left as it is.
 */
export const DATA_DIRECTORY_MODE = 0o700;
/** A database file keygate creates; SQLite gives its -wal and -shm files the same mode. */
export const DATABASE_FILE_MODE = 0o600;

/**
 * The most of the file SQLite keeps in memory (KiB; it grows only as pages are read). Its default,
 * 2 MiB, cannot hold the index pages of a thousand users creating keys, so with a million keys stored
 * each insert read them from the file again (bench/HISTORY.md).
 */
export const CACHE_KIB = 65_536;

export function openDatabase(url: string): Db {
  if (url !== ':memory:') createPrivately(url);
  const client = new Database(url, { create: true, strict: true });
  applyPragmas(client);
  assertWritable(client);
  const db = drizzle({ client, schema });
  migrate(db);
  client.run(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  return db;
}

/** Every connection's settings, the server's and `keygate backup`'s alike. */
export function applyPragmas(client: Database): void {
  // busy_timeout first: the pragmas below may themselves need a lock another process holds.
  client.run(`PRAGMA busy_timeout = ${STARTUP_BUSY_TIMEOUT_MS}`);
  client.run('PRAGMA journal_mode = WAL');
  // FULL: a commit returns only once the WAL is on disk, so an acknowledged write survives a crash.
  client.run('PRAGMA synchronous = FULL');
  client.run('PRAGMA foreign_keys = ON');
  client.run(`PRAGMA cache_size = -${CACHE_KIB}`);
  // A statement that fires the counting triggers keeps a statement journal (to undo itself alone):
  // in memory, not in a temporary file, which cost more than the trigger (bench/HISTORY.md).
  client.run('PRAGMA temp_store = MEMORY');
}

/** Creates the directories and an empty database file with owner-only modes (umask cannot widen them). */
function createPrivately(path: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: DATA_DIRECTORY_MODE });
  try {
    closeSync(openSync(path, 'wx', DATABASE_FILE_MODE));
  } catch (error) {
    // An existing file is opened as it is (and its mode left alone); SQLite reports any other problem.
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') return;
  }
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
