// The database as the one-shot commands meet it: named in messages without a password, required to
// exist where a mistyped path would otherwise create one, and a failure to open it said plainly.
import { existsSync } from 'node:fs';
import { type Config, type DatabaseChoice, sqliteFile } from '../config';
import { type OpenedStore, openStore } from '../keygate';
import type { Command } from './commands';
import { StartupError, UsageError } from './errors';

/** Only `serve` and `migrate` may create a SQLite file: elsewhere a mistyped path is an error. */
export function existingDatabase({ database }: Config, command: Command): void {
  const file = sqliteFile(database);
  if (file !== undefined && !existsSync(file)) {
    throw new UsageError(
      `the database ${file} does not exist; keygate ${command} uses an existing one ` +
        '(keygate serve or keygate migrate creates it). Check DATABASE_URL or --database-url.',
    );
  }
}

/** The database of a one-shot command; a failure to open it names it (without a password). */
export async function openForCommand(config: Config): Promise<OpenedStore> {
  try {
    return await openStore(config, { serving: false });
  } catch (error) {
    throw new StartupError(
      `cannot open database ${databaseShown(config.database)}: ${(error as Error).message}`,
    );
  }
}

/** The database for messages: the SQLite file's absolute path, or the URL without its password. */
export function databaseShown(database: DatabaseChoice): string {
  return database.engine === 'postgres' ? database.redacted : database.path;
}
