// Build-time macro: reads drizzle/ (SQLite) and drizzle/postgres/ when the code is bundled, so the
// migrations of both dialects travel inside the compiled binary and keygate runs from any directory
// with no file beside it.
import { join } from 'node:path';
import { readMigrationFiles } from 'drizzle-orm/migrator';

const DRIZZLE = join(import.meta.dir, '..', '..', 'drizzle');

export function embeddedMigrations() {
  return readMigrationFiles({ migrationsFolder: DRIZZLE });
}

export function embeddedPostgresMigrations() {
  return readMigrationFiles({ migrationsFolder: join(DRIZZLE, 'postgres') });
}
