// One credential in, one verdict out: the rules shared by POST /apikeys/verify and forward-auth.
// A key is authenticated by the apikeys service (the key cache, one hash, one compare), a token by
// the JwtAuthority; the verdict is then judged against the level asked for.
import type { ApiKeyService, KeyAuthentication } from '../apikeys/service';
import type { ApiKeyRow } from '../apikeys/store';
import type { JwtAuthority, TokenIdentity, TokenRefusal } from '../auth/jwt';
import { andThen, type SyncOrAsync } from '../core/sync-or-async';
import { type UsageRecorder, usageOutcomeOf } from '../usage/counter';

export type Principal =
  | { type: 'key'; key: string; userId: number; level: number; name: string; expiresAt: string }
  | { type: 'jwt'; userId: number; level: number; expiresAt: string };

export type Verdict =
  | { valid: true; code: 'VALID'; principal: Principal }
  | { valid: false; code: 'INSUFFICIENT_LEVEL'; principal: Principal }
  | { valid: false; code: 'NOT_FOUND' | 'EXPIRED' }
  /** `reason` is for the request's log line only (LOG_LEVEL=debug), never for the answer. */
  | { valid: false; code: 'INVALID_TOKEN'; reason: TokenRefusal };

export type Verifier = ReturnType<typeof createVerifier>;

/**
 * Told the outcome of each verify or forward-auth check (metrics): the scheme of the credential
 * (`none` when there was none) and the verdict's code, or NO_CREDENTIALS / MALFORMED for the
 * forward-auth refusals that come before a verdict.
 */
export type OnVerdict = (scheme: 'key' | 'jwt' | 'none', code: string) => void;

export function createVerifier({
  jwt,
  service,
  usage,
}: {
  jwt: Pick<JwtAuthority, 'verify'>;
  service: Pick<ApiKeyService, 'authenticateKey'>;
  /** Told each verdict on an existing key (a new code is counted by usageOutcomeOf, denied by default). */
  usage?: UsageRecorder;
}) {
  return {
    /**
     * At once on a key cache hit or a synchronous store's read (no promise), else a promise. `judge`
     * may turn the verdict into the final one (forward-auth's level, required after the credential is
     * judged); the final verdict is the one the key's usage counts, and none when `judge` throws.
     */
    verifyKey(
      key: string,
      secret: string,
      minLevel: number,
      judge?: (verdict: Verdict) => Verdict,
    ): SyncOrAsync<Verdict> {
      return andThen(service.authenticateKey(key, secret), (outcome) => {
        const judged = keyVerdict(outcome, minLevel);
        const verdict = judge === undefined ? judged : judge(judged);
        // Only ids that name a key: an unknown id counts nothing (a wrong secret carries its key's id).
        const keyId = outcome.status === 'not-found' ? outcome.keyId : outcome.row.id;
        if (keyId !== undefined) usage?.record(keyId, usageOutcomeOf(verdict.code));
        return verdict;
      });
    },

    async verifyToken(token: string, minLevel: number): Promise<Verdict> {
      const check = await jwt.verify(token);
      if (!check.ok) return { valid: false, code: 'INVALID_TOKEN', reason: check.reason };
      return judged(tokenPrincipal(check.identity), minLevel);
    },
  };
}

function keyVerdict(outcome: KeyAuthentication, minLevel: number): Verdict {
  if (outcome.status === 'not-found') return { valid: false, code: 'NOT_FOUND' };
  if (outcome.status === 'expired') return { valid: false, code: 'EXPIRED' };
  return judged(keyPrincipal(outcome.row), minLevel);
}

/** A valid verdict below `minLevel` becomes INSUFFICIENT_LEVEL. */
export function judged(principal: Principal, minLevel: number): Verdict {
  return principal.level < minLevel
    ? { valid: false, code: 'INSUFFICIENT_LEVEL', principal }
    : { valid: true, code: 'VALID', principal };
}

export function keyPrincipal(row: ApiKeyRow): Principal {
  return {
    type: 'key',
    key: row.id,
    userId: row.userId,
    level: row.level,
    name: row.name,
    expiresAt: new Date(row.expiresAt).toISOString(),
  };
}

export function tokenPrincipal(identity: TokenIdentity): Principal {
  return {
    type: 'jwt',
    userId: identity.userId,
    level: identity.level,
    expiresAt: new Date(identity.expiresAt).toISOString(),
  };
}
