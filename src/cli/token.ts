// `keygate token`: a JWT signed with the server's secret, never with one invented here.
import { existsSync } from 'node:fs';
import { createJwtAuthority } from '../auth/jwt';
import { isMappableSubject, MAX_SUBJECT_LENGTH } from '../auth/token-users';
import type { Config } from '../config';
import { systemClock } from '../core/clock';
import { generatedSecretPath, resolveJwtSecret, SECRET_REQUIRED_WITH_POSTGRES } from '../jwt-secret';
import { UsageError } from './errors';

export async function mintToken(config: Config, options: Record<string, string>): Promise<string> {
  if (config.jwtKeySource !== 'secret') {
    const setting = config.jwtKeySource === 'jwks' ? 'JWT_JWKS_URL' : 'JWT_PUBLIC_KEY';
    throw new UsageError(
      `keygate token signs only HS256 tokens with JWT_SECRET; with ${setting} set, tokens come from your identity provider.`,
    );
  }
  // An operator's token names the operator, not a user: its sub is any subject, as mapped ids take.
  const scope = options.scope === undefined ? undefined : scopeOf(options.scope);
  const sub =
    config.jwtUserIds === 'mapped' || scope !== undefined
      ? mappableSubject(
          options.sub,
          config.jwtUserIds === 'mapped' ? 'with JWT_USER_IDS=mapped' : 'with --scope',
        )
      : wholeNumber('--sub', options.sub, 0, Number.MAX_SAFE_INTEGER);
  const level = options.level === undefined ? undefined : wholeNumber('--level', options.level, 0, 8);
  // A token living longer than MAX_EXPIRES_IN_SECONDS would be refused by the server.
  const ttlSeconds = wholeNumber('--ttl', options.ttl ?? '3600', 1, config.maxExpiresInSeconds);
  refuseToInventSecret(config);
  const jwt = createJwtAuthority({
    secret: resolveJwtSecret(config),
    issuer: config.jwtIssuer,
    audience: config.jwtAudience,
    clock: systemClock,
  });
  return jwt.sign({ sub, level, scope, ttlSeconds });
}

/**
 * A token signed with a secret the server does not have is refused by it: without JWT_SECRET, use the
 * file the server created beside its database, and never create one here.
 */
function refuseToInventSecret(config: Config): void {
  if (config.jwtSecret !== undefined) return;
  const file = generatedSecretPath(config.database);
  if (file === undefined) throw new UsageError(SECRET_REQUIRED_WITH_POSTGRES);
  if (existsSync(file)) return;
  throw new UsageError(
    `no JWT secret to sign with: JWT_SECRET is unset and ${file} does not exist. The server keeps its ` +
      'secret there, beside its database, once it has started; give keygate token the same ' +
      'DATABASE_URL (or --database-url) as the server, or the same JWT_SECRET.',
  );
}

/** The scope claim: scopes separated by single spaces (JWT_ADMIN_SCOPE among them for the operator). */
function scopeOf(value: string): string {
  if (!/^[\x21\x23-\x5b\x5d-\x7e]+( [\x21\x23-\x5b\x5d-\x7e]+)*$/.test(value)) {
    throw new UsageError(
      '--scope must be scopes separated by single spaces, each printable ASCII without quotes or backslashes.',
    );
  }
  return value;
}

/** The token only names its subject: the server gives it a user id on first use. */
function mappableSubject(value: string | undefined, why: string): string {
  if (value === undefined) throw new UsageError('--sub is required.');
  if (!isMappableSubject(value)) {
    throw new UsageError(`--sub must be 1 to ${MAX_SUBJECT_LENGTH} characters, without NUL, ${why}.`);
  }
  return value;
}

export function wholeNumber(flag: string, value: string | undefined, min: number, max: number): number {
  if (value === undefined) throw new UsageError(`${flag} is required.`);
  const parsed = /^[0-9]+$/.test(value) ? Number(value) : Number.NaN;
  if (!(parsed >= min && parsed <= max))
    throw new UsageError(`${flag} must be an integer from ${min} to ${max}.`);
  return parsed;
}
