// One credential in, one verdict out: the answer shared by POST /apikeys/verify and forward-auth.
// A key goes through service.authenticateKey (and the key cache), a token through the JwtAuthority.
import type { ApiKeyService, KeyAuthentication } from '../apikeys/service';
import type { ApiKeyRow } from '../apikeys/store';
import type { JwtAuthority, TokenIdentity } from '../auth/jwt';
import { noteTokenRefusal } from '../http/edge';

export type Principal =
  | { type: 'key'; key: string; userId: number; level: number; name: string; expiresAt: string }
  | { type: 'jwt'; userId: number; level: number; expiresAt: string };

export type Verdict =
  | { valid: true; code: 'VALID'; principal: Principal }
  | { valid: false; code: 'INSUFFICIENT_LEVEL'; principal: Principal }
  | { valid: false; code: 'NOT_FOUND' | 'EXPIRED' | 'INVALID_TOKEN' };

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
}: {
  jwt: Pick<JwtAuthority, 'verify'>;
  service: Pick<ApiKeyService, 'authenticateKey'>;
}) {
  return {
    /** At once on a key cache hit or a synchronous store's read (no promise), else a promise. */
    verifyKey(key: string, secret: string, minLevel: number): Verdict | Promise<Verdict> {
      const outcome = service.authenticateKey(key, secret);
      return outcome instanceof Promise
        ? outcome.then((settled) => keyVerdict(settled, minLevel))
        : keyVerdict(outcome, minLevel);
    },

    /** `request`, when given, carries the refusal's reason to its log line. */
    async verifyToken(token: string, minLevel: number, request?: Request): Promise<Verdict> {
      const check = await jwt.verify(token);
      if (!check.ok) {
        if (request !== undefined) noteTokenRefusal(request, check.reason);
        return { valid: false, code: 'INVALID_TOKEN' };
      }
      return judged(tokenPrincipal(check.identity), minLevel);
    },
  };
}

function keyVerdict(outcome: KeyAuthentication, minLevel: number): Verdict {
  if (outcome.status === 'not-found') return { valid: false, code: 'NOT_FOUND' };
  if (outcome.status === 'expired') return { valid: false, code: 'EXPIRED' };
  return judged(keyPrincipal(outcome.row), minLevel);
}

function judged(principal: Principal, minLevel: number): Verdict {
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
