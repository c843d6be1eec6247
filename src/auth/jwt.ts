// JWT verification and signing via jose. The key is a shared secret (HS256, which keygate can also
// sign with), an identity provider's JWKS endpoint, or one PEM public key; the algorithms are pinned
// per source (jwt-keys.ts). `exp` and `sub` are required, `nbf`/`iss`/`aud` honoured; `exp` must be
// finite and no later than the end of year 9999 (MAX_EXPIRES_IN_SECONDS bounds keys, not tokens: an
// identity provider's one-hour token must work wherever keys are capped below an hour), `iat` not in
// the future, and every segment
// canonical base64url (one string per token, not eight). A refusal says why, for the debug log.
// A verified token is remembered until its `exp`: clients reuse a token for many requests, and the
// signature check was the largest single cost of a create (bench/HISTORY.md); every time
// check is re-run on each hit, so the cache never lets a token outlive one, nor its JWKS key.

import { errors, importSPKI, type JWTVerifyGetKey, jwtVerify, SignJWT } from 'jose';
import type { Clock } from '../core/clock';
import { isLevel, MAX_LEVEL } from '../core/levels';
import { createJwksKeySet, type JwksKeySet, JwksUnavailable } from './jwks';
import type { AsymmetricAlgorithm, JwtAlgorithm } from './jwt-keys';

export const JWT_ALGORITHM = 'HS256';
/** 9999-12-31T23:59:59Z in seconds: a later `exp` has no ISO 8601 form for `expiresAt`. */
export const LATEST_TOKEN_EXP_SECONDS = 253_402_300_799;

/**
 * Who a verified token speaks for, as the provider names it, and until when (`exp` in milliseconds):
 * `subject` is `sub` as text (a numeric `sub` as its decimal digits), `issuer` is `iss` ('' without
 * one), `scopes` the space-separated tokens of its `scope` claim (none when it has no string `scope`).
 * Which user id that is, token-users.ts decides: the authority knows no database.
 */
export type TokenIdentity = {
  subject: string;
  /** Whether `sub` was a JSON string (an operator's must be one: it names the operator). */
  subjectIsText: boolean;
  issuer: string;
  level: number;
  expiresAt: number;
  scopes: readonly string[];
};

/** Why a token was refused (logged at LOG_LEVEL=debug); 'invalid' for anything not told apart. */
export type TokenRefusal =
  | 'malformed'
  | 'algorithm-not-allowed'
  | 'unknown-kid'
  | 'jwks-unavailable'
  | 'bad-signature'
  | 'expired'
  | 'not-yet-valid'
  | 'issued-in-future'
  | 'exp-too-far'
  | 'wrong-issuer'
  | 'wrong-audience'
  | 'claims'
  | 'sub-not-numeric'
  | 'invalid';

export type TokenCheck = { ok: true; identity: TokenIdentity } | { ok: false; reason: TokenRefusal };

/** Where the verification keys come from: exactly one. */
export type JwtKeySource =
  | { secret: string }
  | {
      jwks: { url: string; cooldownMs?: number; timeoutMs?: number };
      algorithms: readonly AsymmetricAlgorithm[];
    }
  | { publicKey: string; algorithms: readonly AsymmetricAlgorithm[] };

export type JwtOptions = JwtKeySource & {
  issuer?: string;
  audience?: string;
  clock: Clock;
  /** Seconds of clock skew allowed on exp, nbf and iat (JWT_CLOCK_TOLERANCE_SECONDS). */
  clockToleranceSeconds?: number;
};

export type JwtAuthority = {
  verify(token: string): Promise<TokenCheck>;
  /** HS256 only: with an identity provider's keys keygate holds no signing key, and this rejects. */
  sign(claims: { sub: number | string; level?: number; scope?: string; ttlSeconds: number }): Promise<string>;
};

/** At most this many verified tokens are remembered; the oldest is forgotten first. */
export const VERIFIED_TOKEN_CACHE_SIZE = 10_000;

/** The time claims, in seconds, checked again on every cache hit. */
type TimeClaims = { exp: number; nbf: number | undefined; iat: number | undefined };

/** `generation`: the JWKS key set the token was verified under (0 for a fixed key). */
type VerifiedToken = { check: TokenCheck; times: TimeClaims; generation: number };

const refusals = new Map<TokenRefusal, TokenCheck>();
function refused(reason: TokenRefusal): TokenCheck {
  let check = refusals.get(reason);
  if (check === undefined) {
    check = Object.freeze({ ok: false, reason });
    refusals.set(reason, check);
  }
  return check;
}

export function createJwtAuthority(options: JwtOptions): JwtAuthority {
  const { key, algorithms, keySet } = verificationKey(options);
  // With a JWKS, a remembered token is checked again once the keys are due for a refresh or have
  // changed, so a key the provider withdrew stops its tokens too.
  const currentKeys = (): number | undefined =>
    keySet === undefined ? 0 : keySet.due ? undefined : keySet.generation;
  const tolerance = options.clockToleranceSeconds ?? 0;

  /** Seconds, compared as jose compares them, each widened by the tolerance. */
  function timeRefusal({ exp, nbf, iat }: TimeClaims, now: number): TokenRefusal | undefined {
    if (!Number.isFinite(exp) || exp > LATEST_TOKEN_EXP_SECONDS) return 'exp-too-far';
    if (exp <= now - tolerance) return 'expired';
    if (nbf !== undefined && nbf > now + tolerance) return 'not-yet-valid';
    if (iat !== undefined && !(Number.isFinite(iat) && iat <= now + tolerance)) return 'issued-in-future';
    return undefined;
  }

  const verified = new Map<string, VerifiedToken>();
  return {
    async verify(token) {
      const now = Math.floor(options.clock() / 1000);
      const known = verified.get(token);
      if (known !== undefined) {
        if (known.generation === currentKeys() && timeRefusal(known.times, now) === undefined) {
          return known.check;
        }
        verified.delete(token);
      }
      if (!isCanonicalCompact(token)) return refused('malformed');
      let payload: Awaited<ReturnType<typeof jwtVerify>>['payload'];
      try {
        ({ payload } = await jwtVerify(token, await key, {
          algorithms: [...algorithms],
          requiredClaims: ['exp', 'sub'],
          issuer: options.issuer,
          audience: options.audience,
          currentDate: new Date(options.clock()),
          clockTolerance: tolerance,
        }));
      } catch (error) {
        return refused(refusalOf(error));
      }
      // requiredClaims made `exp` a number; jose rejects a non-numeric `nbf` or `iat`.
      const times: TimeClaims = { exp: payload.exp as number, nbf: payload.nbf, iat: payload.iat };
      const late = timeRefusal(times, now);
      if (late !== undefined) return refused(late);
      const subject = subjectText(payload.sub);
      const issuer = payload.iss ?? '';
      const level = payload.level === undefined ? MAX_LEVEL : parseLevel(payload.level);
      if (subject === null || typeof issuer !== 'string' || level === null) return refused('claims');
      const check: TokenCheck = Object.freeze({
        ok: true,
        identity: Object.freeze({
          subject,
          subjectIsText: typeof payload.sub === 'string',
          issuer,
          level,
          expiresAt: times.exp * 1000,
          scopes: scopesOf(payload.scope),
        }),
      });
      if (verified.size >= VERIFIED_TOKEN_CACHE_SIZE) verified.delete(verified.keys().next().value as string);
      verified.set(token, { check, times, generation: keySet?.generation ?? 0 });
      return check;
    },
    async sign({ sub, level, scope, ttlSeconds }) {
      if (!('secret' in options)) {
        throw new Error(
          'keygate signs tokens only with its HS256 secret; tokens come from the identity provider',
        );
      }
      const now = Math.floor(options.clock() / 1000);
      const jwt = new SignJWT({
        ...(level === undefined ? {} : { level }),
        ...(scope === undefined ? {} : { scope }),
      })
        .setProtectedHeader({ alg: JWT_ALGORITHM, typ: 'JWT' })
        .setSubject(String(sub))
        .setIssuedAt(now)
        .setExpirationTime(now + ttlSeconds);
      if (options.issuer) jwt.setIssuer(options.issuer);
      if (options.audience) jwt.setAudience(options.audience);
      return jwt.sign((await key) as CryptoKey);
    },
  };
}

type VerificationKey = CryptoKey | JWTVerifyGetKey;

function verificationKey(options: JwtOptions): {
  key: Promise<VerificationKey>;
  algorithms: readonly JwtAlgorithm[];
  keySet?: JwksKeySet;
} {
  if ('secret' in options) {
    // Imported once: given raw bytes, jose imports a CryptoKey on every call.
    const key = crypto.subtle.importKey(
      'raw',
      new TextEncoder().encode(options.secret),
      { name: 'HMAC', hash: 'SHA-256' },
      false,
      ['sign', 'verify'],
    );
    return { key, algorithms: [JWT_ALGORITHM] };
  }
  if ('jwks' in options) {
    const keySet = createJwksKeySet({ ...options.jwks, clock: options.clock });
    return { key: Promise.resolve(keySet), algorithms: options.algorithms, keySet };
  }
  // One PEM, imported once per algorithm it is used with (an RSA key serves RS256 and PS256 alike).
  const imported = new Map<string, Promise<CryptoKey>>();
  const pem = options.publicKey;
  const getKey: JWTVerifyGetKey = ({ alg }) => {
    let key = imported.get(alg);
    if (key === undefined) {
      key = importSPKI(pem, alg);
      imported.set(alg, key);
    }
    return key;
  };
  return { key: Promise.resolve(getKey), algorithms: options.algorithms };
}

/** Three segments of base64url that decode and encode back to themselves: no padding, no stray bits. */
function isCanonicalCompact(token: string): boolean {
  const segments = token.split('.');
  if (segments.length !== 3) return false;
  for (const segment of segments) {
    if (!/^[A-Za-z0-9_-]*$/.test(segment)) return false;
    if (Buffer.from(segment, 'base64url').toString('base64url') !== segment) return false;
  }
  return true;
}

function refusalOf(error: unknown): TokenRefusal {
  if (error instanceof errors.JWTExpired) return 'expired';
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.claim === 'iss') return 'wrong-issuer';
    if (error.claim === 'aud') return 'wrong-audience';
    if (error.claim === 'nbf') return 'not-yet-valid';
    return 'claims';
  }
  if (error instanceof errors.JWSSignatureVerificationFailed) return 'bad-signature';
  if (error instanceof errors.JOSEAlgNotAllowed) return 'algorithm-not-allowed';
  if (error instanceof errors.JWKSNoMatchingKey) return 'unknown-kid';
  if (error instanceof JwksUnavailable) return 'jwks-unavailable';
  if (
    error instanceof errors.JWSInvalid ||
    error instanceof errors.JWTInvalid ||
    error instanceof errors.JOSENotSupported
  ) {
    return 'malformed';
  }
  return 'invalid';
}

/** `sub` as text: a string as it is, a JSON number only as a non-negative safe integer's digits. */
function subjectText(sub: unknown): string | null {
  if (typeof sub === 'string') return sub;
  return typeof sub === 'number' && Number.isSafeInteger(sub) && sub >= 0 ? String(sub) : null;
}

/** A `scope` claim's tokens: it is one string of scopes separated by spaces; anything else grants none. */
function scopesOf(scope: unknown): readonly string[] {
  if (typeof scope !== 'string') return NO_SCOPES;
  return Object.freeze(scope.split(' ').filter((token) => token !== ''));
}
const NO_SCOPES: readonly string[] = Object.freeze([]);

function parseLevel(level: unknown): number | null {
  return isLevel(level) ? level : null;
}
