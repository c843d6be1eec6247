// The public keys GitHub signs its secret scanning alerts with, fetched from
// GITHUB_SECRET_SCANNING_KEYS_URL and kept in memory, and the check of an alert's signature (ECDSA
// P-256 with SHA-256 over the raw body, a base64 DER signature, the key named by its identifier).
// - every listed key counts, current or not: GitHub signs with one while the others may still be
//   in flight;
// - the keys are fetched on first use and again once an hour old; a fetch that fails (down, timeout,
//   not 200, no key in the answer) keeps the keys already held, and is tried again at most once per
//   cooldown (30 s) counted from the last attempt;
// - an identifier not among the keys fetches them again at most once per cooldown, so a flood of
//   made-up identifiers costs GitHub's endpoint one request every 30 s;
// - the clock is injected, so tests move time instead of sleeping.
import { createPublicKey, type KeyObject, verify } from 'node:crypto';
import type { Clock } from '../core/clock';

export const GITHUB_KEYS_TTL_MS = 3_600_000;
export const GITHUB_KEYS_COOLDOWN_MS = 30_000;
const GITHUB_KEYS_TIMEOUT_MS = 5_000;
/** GitHub's answer is a few kilobytes; anything this large is not it. */
const MAX_KEYS_BYTES = 1024 * 1024;

/** The keys URL could not be read and no keys are held yet: the alert cannot be checked now. */
export class GithubKeysUnavailable extends Error {
  override name = 'GithubKeysUnavailable';
}

export type GithubKeySet = ReturnType<typeof createGithubKeySet>;

export function createGithubKeySet({
  url,
  clock,
  ttlMs = GITHUB_KEYS_TTL_MS,
  cooldownMs = GITHUB_KEYS_COOLDOWN_MS,
  timeoutMs = GITHUB_KEYS_TIMEOUT_MS,
}: {
  url: string;
  clock: Clock;
  ttlMs?: number;
  cooldownMs?: number;
  timeoutMs?: number;
}) {
  let keys: Map<string, KeyObject> | undefined;
  let loadedAt = Number.NEGATIVE_INFINITY;
  let attemptedAt = Number.NEGATIVE_INFINITY;
  let pending: Promise<void> | undefined;
  let fetches = 0;

  const load = (): Promise<void> => {
    pending ??= (async () => {
      attemptedAt = clock();
      fetches++;
      try {
        keys = await fetchKeys(url, timeoutMs);
        loadedAt = clock();
      } finally {
        pending = undefined;
      }
    })();
    return pending;
  };
  const mayFetch = () => clock() - attemptedAt >= cooldownMs;

  /** The key named `keyId`, or undefined when GitHub lists none of that name. */
  async function keyOf(keyId: string): Promise<KeyObject | undefined> {
    if (keys === undefined) {
      if (pending === undefined && !mayFetch()) {
        throw new GithubKeysUnavailable('no keys fetched yet (the last attempt failed)');
      }
      await load().catch((error: unknown) => {
        throw new GithubKeysUnavailable(`the keys URL failed: ${(error as Error).message}`);
      });
    } else if (clock() - loadedAt >= ttlMs && mayFetch()) {
      await load().catch(() => {}); // a failed refresh keeps the keys in hand
    }
    const held = (keys as Map<string, KeyObject>).get(keyId);
    if (held !== undefined || !mayFetch()) return held;
    // An identifier not seen yet: GitHub may have added a key. A failed fetch keeps the old keys.
    await load().catch(() => {});
    return keys?.get(keyId);
  }

  return {
    keyOf,
    /** Whether `signature` (base64 of a DER ECDSA signature) signs `body` with `key`. */
    verifies(key: KeyObject, body: Uint8Array, signature: string): boolean {
      try {
        return verify('sha256', body, { key, dsaEncoding: 'der' }, Buffer.from(signature, 'base64'));
      } catch {
        return false;
      }
    },
    /** Fetches attempted so far (tests). */
    get fetches() {
      return fetches;
    },
  };
}

async function fetchKeys(url: string, timeoutMs: number): Promise<Map<string, KeyObject>> {
  const response = await fetch(url, {
    redirect: 'manual',
    signal: AbortSignal.timeout(timeoutMs),
    headers: { accept: 'application/json' },
  });
  if (response.status !== 200) throw new Error(`it answered ${response.status}`);
  const text = await response.text();
  if (text.length > MAX_KEYS_BYTES) throw new Error('the answer is larger than 1 MiB');
  const listed = (JSON.parse(text) as { public_keys?: unknown })?.public_keys;
  if (!Array.isArray(listed)) throw new Error('the answer has no public_keys list');
  const keys = new Map<string, KeyObject>();
  for (const entry of listed as Array<{ key_identifier?: unknown; key?: unknown }>) {
    if (typeof entry?.key_identifier !== 'string' || typeof entry.key !== 'string') continue;
    try {
      const key = createPublicKey(entry.key);
      if (key.asymmetricKeyType === 'ec') keys.set(entry.key_identifier, key);
    } catch {
      // A key that does not parse signs nothing; the others still count.
    }
  }
  if (keys.size === 0) throw new Error('the answer lists no usable EC public key');
  return keys;
}
