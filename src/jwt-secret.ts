// Where the HS256 secret comes from: JWT_SECRET (or JWT_SECRET_FILE); else, on SQLite, a random one
// created on first start beside the database (mode 0600) and reused, so `keygate token` and the server
// agree without setup. PostgreSQL replicas run on different machines and share no directory, so a
// generated file would give each replica its own secret: there JWT_SECRET is required.
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { type Config, ConfigError, type DatabaseChoice, sqliteFile } from './config';
import { DATA_DIRECTORY_MODE } from './db/sqlite/open';

export const JWT_SECRET_FILE = 'jwt-secret';

export const SECRET_REQUIRED_WITH_POSTGRES =
  'With a PostgreSQL DATABASE_URL, set JWT_SECRET or JWT_SECRET_FILE (or JWT_JWKS_URL, JWT_PUBLIC_KEY): every replica must verify tokens with the same key, so none is generated.';

/** The generated secret's file: beside the SQLite database (`./data` for `:memory:`); none on PostgreSQL. */
export function generatedSecretPath(database: DatabaseChoice): string | undefined {
  if (database.engine === 'postgres') return undefined;
  const file = sqliteFile(database);
  return join(file === undefined ? resolve('data') : dirname(file), JWT_SECRET_FILE);
}

export function resolveJwtSecret(config: Pick<Config, 'jwtSecret' | 'database'>): string {
  if (config.jwtSecret !== undefined) return config.jwtSecret;
  const path = generatedSecretPath(config.database);
  if (path === undefined) throw new ConfigError(SECRET_REQUIRED_WITH_POSTGRES);
  try {
    mkdirSync(dirname(path), { recursive: true, mode: DATA_DIRECTORY_MODE });
    // 'wx' fails if the file exists, so two processes starting together keep the first one's secret.
    writeFileSync(path, `${randomBytes(48).toString('base64url')}\n`, { flag: 'wx', mode: 0o600 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
      throw new ConfigError(`Cannot create the JWT secret file ${path}: ${(error as Error).message}`);
    }
  }
  try {
    chmodSync(path, 0o600);
    const secret = readFileSync(path, 'utf8').trim();
    if (Buffer.byteLength(secret) < 32) throw new Error('it holds fewer than 32 bytes');
    return secret;
  } catch (error) {
    throw new ConfigError(`Cannot use the JWT secret file ${path}: ${(error as Error).message}`);
  }
}
