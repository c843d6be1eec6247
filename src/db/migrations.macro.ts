// Build-time macro: reads drizzle/ when the code is bundled, so the migrations travel inside the
// compiled binary and keygate runs from any directory with no file beside it.
import { join } from 'node:path';
import { readMigrationFiles } from 'drizzle-orm/migrator';

export function embeddedMigrations() {
  return readMigrationFiles({ migrationsFolder: join(import.meta.dir, '..', '..', 'drizzle') });
}
