// An identity provider's keys, fetched from its JWKS endpoint and kept in memory (built on jose's
// createLocalJWKSet). jose's own createRemoteJWKSet stops answering once its cache is older than
// cacheMaxAge while the endpoint is down, counts its cooldown from the last *successful* fetch (so an
// unreachable endpoint is asked again for every unknown `kid`), and reads Date.now(). Here:
// - the keys are fetched on first use, and again for a `kid` not among them, at most once per
//   cooldown (30 s) counted from the last attempt, whatever its outcome;
// - once the keys are older than refreshMs (10 min), the next request refreshes them first (so a key
//   the provider withdrew stops verifying), at most once per cooldown while the endpoint fails;
// - a fetch that fails (down, timeout, not 200, not a key set) keeps the keys already held;
// - the clock is injected, so tests move time instead of sleeping.
import { createLocalJWKSet, errors, type JWK, type JWTVerifyGetKey } from 'jose';
import type { Clock } from '../core/clock';

export const JWKS_COOLDOWN_MS = 30_000;
export const JWKS_TIMEOUT_MS = 5_000;
export const JWKS_REFRESH_MS = 600_000;
/** A key set larger than this is not one an identity provider serves. */
const MAX_JWKS_BYTES = 1024 * 1024;

/** The endpoint could not be read and no keys are held yet. */
export class JwksUnavailable extends Error {
  override name = 'JwksUnavailable';
}

export type JwksOptions = {
  url: string;
  clock: Clock;
  cooldownMs?: number;
  timeoutMs?: number;
  refreshMs?: number;
};

export type JwksKeySet = JWTVerifyGetKey & {
  /** Fetches attempted so far. */
  readonly fetches: number;
  /** Counts the key sets loaded: a token verified under an older one is checked again. */
  readonly generation: number;
  /** The keys are due for a refresh: the next token should go through the key set. */
  readonly due: boolean;
};

export function createJwksKeySet({
  url,
  clock,
  cooldownMs = JWKS_COOLDOWN_MS,
  timeoutMs = JWKS_TIMEOUT_MS,
  refreshMs = JWKS_REFRESH_MS,
}: JwksOptions): JwksKeySet {
  let local: ReturnType<typeof createLocalJWKSet> | undefined;
  let attemptedAt = Number.NEGATIVE_INFINITY;
  let loadedAt = Number.NEGATIVE_INFINITY;
  let pending: Promise<void> | undefined;
  let fetches = 0;
  let generation = 0;

  const load = (): Promise<void> => {
    pending ??= (async () => {
      attemptedAt = clock();
      fetches++;
      try {
        const keys = await fetchKeySet(url, timeoutMs);
        local = createLocalJWKSet(keys);
        loadedAt = clock();
        generation++;
      } finally {
        pending = undefined;
      }
    })();
    return pending;
  };
  const mayFetch = () => clock() - attemptedAt >= cooldownMs;
  const due = () => clock() - loadedAt >= refreshMs && mayFetch();

  const getKey = async (...args: Parameters<JWTVerifyGetKey>) => {
    if (local === undefined) {
      if (pending === undefined && !mayFetch()) throw new JwksUnavailable('no keys fetched yet');
      await load().catch((error: unknown) => {
        throw new JwksUnavailable(`the JWKS endpoint failed: ${(error as Error).message}`);
      });
    } else if (due()) {
      await load().catch(() => {}); // a failed refresh keeps the keys in hand
    }
    const held = local as ReturnType<typeof createLocalJWKSet>;
    try {
      return await held(...args);
    } catch (error) {
      if (!(error instanceof errors.JWKSNoMatchingKey) || !mayFetch()) throw error;
      // A `kid` not seen yet: the provider may have added a key. A failed fetch keeps the old keys.
      await load().catch(() => {});
      return (local as ReturnType<typeof createLocalJWKSet>)(...args);
    }
  };
  return Object.defineProperties(getKey, {
    fetches: { get: () => fetches },
    generation: { get: () => generation },
    due: { get: () => local !== undefined && due() },
  }) as JwksKeySet;
}

async function fetchKeySet(url: string, timeoutMs: number): Promise<{ keys: JWK[] }> {
  const response = await fetch(url, {
    redirect: 'manual',
    signal: AbortSignal.timeout(timeoutMs),
    headers: { accept: 'application/json, application/jwk-set+json' },
  });
  if (response.status !== 200) throw new Error(`it answered ${response.status}`);
  const text = await response.text();
  if (text.length > MAX_JWKS_BYTES) throw new Error('the key set is larger than 1 MiB');
  const body = JSON.parse(text) as { keys?: unknown };
  if (!Array.isArray(body?.keys)) throw new Error('the answer is not a JSON Web Key Set');
  return body as { keys: JWK[] };
}
