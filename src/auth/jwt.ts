// JWT verification and signing (HS256 via jose). The algorithm is pinned, `exp` and `sub` are
// required, `nbf`/`iss`/`aud` are honoured; anything else is a failed authentication. A verified
// token is remembered until its `exp`: clients reuse a token for many requests, and the HMAC check
// through WebCrypto was the largest single cost of a create (bench/RESULTS.md, History).
import { jwtVerify, SignJWT } from 'jose';
import type { Clock } from '../clock';

export const JWT_ALGORITHM = 'HS256';
export const MAX_LEVEL = 8;

/** Who a verified token speaks for, and until when (`exp` in milliseconds). */
export type TokenIdentity = { userId: number; level: number; expiresAt: number };

/** Why a token was refused; 'invalid' for anything not told apart. */
export type TokenRefusal = 'expired' | 'bad-signature' | 'claims' | 'malformed' | 'invalid';

export type TokenCheck = { ok: true; identity: TokenIdentity } | { ok: false; reason: TokenRefusal };

export type JwtOptions = {
  secret: string;
  issuer?: string;
  audience?: string;
  clock: Clock;
};

export type JwtAuthority = {
  verify(token: string): Promise<TokenCheck>;
  sign(claims: { sub: number; level?: number; ttlSeconds: number }): Promise<string>;
};

/** At most this many verified tokens are remembered; the oldest is forgotten first. */
export const VERIFIED_TOKEN_CACHE_SIZE = 10_000;

type VerifiedToken = { check: TokenCheck; exp: number; nbf: number };

const INVALID: TokenCheck = Object.freeze({ ok: false, reason: 'invalid' });

export function createJwtAuthority(options: JwtOptions): JwtAuthority {
  // Imported once: given raw bytes, jose imports a CryptoKey on every call.
  const key = crypto.subtle.importKey(
    'raw',
    new TextEncoder().encode(options.secret),
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['sign', 'verify'],
  );
  const verified = new Map<string, VerifiedToken>();
  return {
    async verify(token) {
      // Seconds, compared as jose compares them: valid while nbf <= now < exp.
      const now = Math.floor(options.clock() / 1000);
      const known = verified.get(token);
      if (known !== undefined) {
        if (known.nbf <= now && now < known.exp) return known.check;
        verified.delete(token);
      }
      try {
        const { payload } = await jwtVerify(token, await key, {
          algorithms: [JWT_ALGORITHM],
          requiredClaims: ['exp', 'sub'],
          issuer: options.issuer,
          audience: options.audience,
          currentDate: new Date(options.clock()),
        });
        const userId = parseUserId(payload.sub);
        const level = payload.level === undefined ? MAX_LEVEL : parseLevel(payload.level);
        if (userId === null || level === null) return INVALID;
        // requiredClaims made `exp` a number; jose rejects a non-numeric `nbf`.
        const exp = payload.exp as number;
        const check: TokenCheck = Object.freeze({
          ok: true,
          identity: Object.freeze({ userId, level, expiresAt: exp * 1000 }),
        });
        if (verified.size >= VERIFIED_TOKEN_CACHE_SIZE)
          verified.delete(verified.keys().next().value as string);
        verified.set(token, { check, exp, nbf: payload.nbf ?? 0 });
        return check;
      } catch {
        return INVALID;
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
      return key.then((cryptoKey) => jwt.sign(cryptoKey));
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
