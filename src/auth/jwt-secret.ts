// Where the JWT secret comes from: JWT_SECRET, or else a random one created on first start in the
// data directory (mode 0600) and reused, so `keygate token` and the server agree without setup.
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Config } from '../config';
import { ConfigError } from '../config';
import { isPostgresUrl } from '../db/postgres/open';
import { DATA_DIRECTORY_MODE } from '../db/sqlite/open';

export const JWT_SECRET_FILE = 'jwt-secret';

/** The directory beside the database; `./data` when the database is in memory. */
export function dataDirectory(databaseUrl: string): string {
  return databaseUrl === ':memory:' ? './data' : dirname(databaseUrl);
}

export function resolveJwtSecret(config: Pick<Config, 'jwtSecret' | 'databaseUrl'>): string {
  if (config.jwtSecret !== undefined) return config.jwtSecret;
  if (isPostgresUrl(config.databaseUrl)) {
    // A secret generated beside one replica would differ from the next replica's.
    throw new ConfigError(
      'With a PostgreSQL DATABASE_URL, set JWT_SECRET (or JWT_JWKS_URL, JWT_PUBLIC_KEY): every replica must verify tokens with the same key.',
    );
  }
  const path = join(dataDirectory(config.databaseUrl), JWT_SECRET_FILE);
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
