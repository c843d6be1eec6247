// `keygate backup FILE`: a copy of the SQLite database made while it serves, and of the JWT secret
// file keygate generated beside it (without it a restored keygate refuses every token issued
// before); PostgreSQL has pg_dump.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { type Config, sqliteFile } from '../config';
import { backupDatabase } from '../db/sqlite/backup';
import { generatedSecretPath } from '../jwt-secret';
import { existingDatabase } from './database';
import { StartupError, UsageError } from './errors';

/** The JWT secret's copy is named after the database's: `<FILE>.jwt-secret`. */
export const SECRET_BACKUP_SUFFIX = '.jwt-secret';

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
  // The generated secret is copied only when the server uses it: a secret the operator sets is theirs.
  const secretFile =
    config.jwtKeySource === 'secret' && config.jwtSecret === undefined
      ? generatedSecretPath(database)
      : undefined;
  const secretTarget = `${target}${SECRET_BACKUP_SUFFIX}`;
  for (const taken of secretFile === undefined ? [target] : [target, secretTarget]) {
    if (existsSync(taken)) {
      throw new UsageError(
        `${taken} already exists; keygate backup writes a new file and never replaces one.`,
      );
    }
  }
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
  return [`backed up ${source} to ${target}`, secretLine(config, secretFile, secretTarget)].join('\n');
}

/** What became of the JWT secret, and what the operator must keep besides the copy. */
function secretLine(config: Config, secretFile: string | undefined, secretTarget: string): string {
  if (config.jwtKeySource !== 'secret') {
    const source = config.jwtKeySource === 'jwks' ? 'JWT_JWKS_URL' : 'JWT_PUBLIC_KEY';
    return `tokens are checked with ${source}: keep that setting; no secret to back up`;
  }
  if (secretFile === undefined) {
    return 'not copied: the JWT secret (JWT_SECRET or JWT_SECRET_FILE) is yours; keep it with this backup, or a restored keygate refuses the tokens issued before';
  }
  if (!existsSync(secretFile)) {
    return `no JWT secret file at ${secretFile} yet (keygate serve creates it): nothing else to keep`;
  }
  try {
    // 'wx': never replaces a file; the owner-only mode is set at creation, before a byte is written.
    writeFileSync(secretTarget, readFileSync(secretFile), { flag: 'wx', mode: 0o600 });
  } catch (error) {
    throw new StartupError(
      `the database is backed up, but the JWT secret ${secretFile} could not be copied to ${secretTarget}: ${(error as Error).message}`,
    );
  }
  return `backed up the JWT secret ${secretFile} to ${secretTarget} (mode 0600); restore it beside the database as jwt-secret, or tokens issued before stop working`;
}
