// JWT verification and signing (HS256 via jose). The algorithm is pinned, `exp` and `sub` are
// required, `nbf`/`iss`/`aud` are honoured; anything else is a failed authentication.
import { jwtVerify, SignJWT } from 'jose';
import type { Clock } from '../clock';

export const JWT_ALGORITHM = 'HS256';
export const MAX_LEVEL = 8;

/** Who a verified token speaks for. */
export type TokenIdentity = { userId: number; level: number };

export type JwtOptions = {
  secret: string;
  issuer?: string;
  audience?: string;
  clock: Clock;
};

export type JwtAuthority = {
  verify(token: string): Promise<TokenIdentity | null>;
  sign(claims: { sub: number; level?: number; ttlSeconds: number }): Promise<string>;
};

export function createJwtAuthority(options: JwtOptions): JwtAuthority {
  const key = new TextEncoder().encode(options.secret);
  return {
    async verify(token) {
      try {
        const { payload } = await jwtVerify(token, key, {
          algorithms: [JWT_ALGORITHM],
          requiredClaims: ['exp', 'sub'],
          issuer: options.issuer,
          audience: options.audience,
          currentDate: new Date(options.clock()),
        });
        const userId = parseUserId(payload.sub);
        const level = payload.level === undefined ? MAX_LEVEL : parseLevel(payload.level);
        return userId === null || level === null ? null : { userId, level };
      } catch {
        return null;
      }
    },
    sign({ sub, level, ttlSeconds }) {
      const now = Math.floor(options.clock() / 1000);
      const jwt = new SignJWT(level === undefined ? {} : { level })
        .setProtectedHeader({ alg: JWT_ALGORITHM, typ: 'JWT' })
        .setSubject(String(sub))
        .setIssuedAt(now)
        .setExpirationTime(now + ttlSeconds);
      if (options.issuer) jwt.setIssuer(options.issuer);
      if (options.audience) jwt.setAudience(options.audience);
      return jwt.sign(key);
    },
  };
}

/** `sub` is a non-negative integer, as a JSON number or a decimal string. */
export function parseUserId(sub: unknown): number | null {
  const value = typeof sub === 'string' && /^[0-9]{1,16}$/.test(sub) ? Number(sub) : sub;
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : null;
}

function parseLevel(level: unknown): number | null {
  return typeof level === 'number' && Number.isInteger(level) && level >= 0 && level <= MAX_LEVEL
    ? level
    : null;
}
