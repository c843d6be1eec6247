// Which user a verified token speaks for: the one place a token's `sub` becomes keygate's user id,
// used by the JWT scheme and by verification alike. JWT_USER_IDS=numeric: `sub` is the user id.
// JWT_USER_IDS=mapped: the pair (`iss`, `sub`) is looked up, or given an id on first use
// (subjects.ts). The answer is kept beside the verified token (the authority hands back the same
// identity object on every cache hit), so a cached token never waits on the database.
import { andThen } from '../core/sync-or-async';
import { type HeldPermissions, heldPermissions } from '../permissions/held';
import type { JwtAuthority, TokenIdentity, TokenRefusal } from './jwt';
import type { CachedSubjects, UserIdMode } from './subjects';

/**
 * Who a token speaks for. `subject` only with mapped user ids; `by` names it in audit lines. Its
 * permissions are its `scope` claim's entries (`held`: ready for checks).
 */
export type TokenUser = {
  userId: number;
  level: number;
  expiresAt: number;
  subject: string | undefined;
  by: string;
  permissions: readonly string[];
  held: HeldPermissions;
};

export type TokenUserCheck = { ok: true; user: TokenUser } | { ok: false; reason: TokenRefusal };

export type TokenUsers = { verify(token: string): Promise<TokenUserCheck> };

/** The longest subject mapped user ids take, in characters (OpenID Connect's bound on `sub`). */
export const MAX_SUBJECT_LENGTH = 255;

const CLAIMS_REFUSED: TokenUserCheck = Object.freeze({ ok: false, reason: 'claims' });
const SUB_NOT_NUMERIC: TokenUserCheck = Object.freeze({ ok: false, reason: 'sub-not-numeric' });

/**
 * The 403 sentence for a refused token. A token that is valid but for its non-numeric `sub` is
 * named as such: it is the usual first mistake with an identity provider's tokens, and the caller
 * holding a validly signed token learns nothing it could not read in the token itself.
 */
export function tokenRefusalSentence(reason: TokenRefusal): string {
  return reason === 'sub-not-numeric'
    ? "The token's sub is not a numeric user id; keygate takes non-numeric subjects with JWT_USER_IDS=mapped."
    : 'The token is not valid.';
}

export function createTokenUsers({
  jwt,
  mode,
  subjects,
}: {
  jwt: Pick<JwtAuthority, 'verify'>;
  mode: UserIdMode;
  /** Needed with mapped user ids. */
  subjects?: Pick<CachedSubjects, 'userIdOf'>;
}): TokenUsers {
  if (mode === 'mapped' && subjects === undefined) throw new Error('mapped user ids need a SubjectStore');
  const known = new WeakMap<TokenIdentity, TokenUserCheck>();
  const remember = (identity: TokenIdentity, check: TokenUserCheck) => {
    known.set(identity, check);
    return check;
  };

  function userOf(identity: TokenIdentity): TokenUserCheck | Promise<TokenUserCheck> {
    const { subject, issuer, level, expiresAt, scopes: permissions } = identity;
    const held = heldPermissions(permissions);
    if (mode === 'numeric') {
      const userId = parseUserId(subject);
      if (userId === null) return SUB_NOT_NUMERIC;
      return {
        ok: true,
        user: { userId, level, expiresAt, subject: undefined, by: `jwt:${userId}`, permissions, held },
      };
    }
    if (!isMappableSubject(subject) || issuer.includes('\u0000')) return CLAIMS_REFUSED;
    return andThen((subjects as CachedSubjects).userIdOf(issuer, subject), (userId) => ({
      ok: true as const,
      user: { userId, level, expiresAt, subject, by: `jwt:${subject}`, permissions, held },
    }));
  }

  return {
    async verify(token) {
      const check = await jwt.verify(token);
      if (!check.ok) return check;
      return known.get(check.identity) ?? remember(check.identity, await userOf(check.identity));
    },
  };
}

/** Numeric user ids: `sub` is a non-negative safe integer, in decimal digits. */
export function parseUserId(subject: string): number | null {
  if (!/^[0-9]{1,16}$/.test(subject)) return null;
  const value = Number(subject);
  return Number.isSafeInteger(value) ? value : null;
}

/**
 * Mapped user ids: any subject of 1 to 255 characters, but for text no database can store (NUL,
 * which PostgreSQL's text refuses, and unpaired surrogates, which are no Unicode at all).
 */
export function isMappableSubject(subject: string): boolean {
  if (subject.length === 0 || subject.includes('\u0000') || !subject.isWellFormed()) return false;
  if (subject.length <= MAX_SUBJECT_LENGTH) return true;
  // Characters, not UTF-16 units: a subject outside the Basic Multilingual Plane counts each once.
  let characters = 0;
  for (const _ of subject) if (++characters > MAX_SUBJECT_LENGTH) return false;
  return true;
}
