// `keygate backup FILE`: a copy of the SQLite database made while it serves; PostgreSQL has pg_dump.
import { resolve } from 'node:path';
import { type Config, sqliteFile } from '../config';
import { backupDatabase } from '../db/sqlite/backup';
import { existingDatabase } from './database';
import { StartupError, UsageError } from './errors';

/** `keygate backup FILE`: SQLite only; PostgreSQL has its own tools, which know its replicas and roles. */
export function backup(config: Config, file: string): string {
  const { database } = config;
  if (database.engine === 'postgres') {
    throw new UsageError(
      'keygate backup copies a SQLite database; back up PostgreSQL with pg_dump (pg_dump -Fc -f keygate.dump DATABASE_URL) and restore with pg_restore.',
    );
  }
  const source = sqliteFile(database);
  if (source === undefined) {
    throw new UsageError('DATABASE_URL is :memory:, which keeps nothing to back up.');
  }
  existingDatabase(config, 'backup');
  const target = resolve(file);
  try {
    backupDatabase(source, target);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') {
      throw new UsageError(
        `${target} already exists; keygate backup writes a new file and never replaces one.`,
      );
    }
    throw new StartupError(`cannot back up ${source} to ${target}: ${(error as Error).message}`);
  }
  return `backed up ${source} to ${target}`;
}
