// The key cache: stored rows kept in memory for KEY_CACHE_SECONDS, so authenticating a key costs no
// database read. Bounded for known keys and, separately, for unknown ids (so an unknown key costs the
// same as a wrong secret after the first request). It holds rows, never a verdict: the secret is
// hashed and compared on every request. The store's change events evict ids, so a deleted or rotated
// key is refused by the very next request.
import type { Clock } from '../core/clock';
import type { ApiKeyRow, ApiKeyStore, KeysChangedListener } from './store';

export const KEY_CACHE_MAX_KEYS = 50_000;
export const KEY_CACHE_MAX_UNKNOWN = 50_000;

export type KeyCacheOptions = {
  store: Pick<ApiKeyStore, 'findKey' | 'onKeysChanged'>;
  clock: Clock;
  /** 0: every lookup reads the store. */
  ttlSeconds: number;
  maxKeys?: number;
  maxUnknown?: number;
  /** Told whether each lookup was answered from memory (metrics). */
  onLookup?: (hit: boolean) => void;
};

export type KeyCache = ReturnType<typeof createKeyCache>;

type Entry = { row: ApiKeyRow | undefined; storedAt: number };
/** A read in flight; `stale` once its id was evicted meanwhile, so its row must not be cached. */
type Read = { promise: Promise<ApiKeyRow | undefined>; stale: boolean };

export function createKeyCache({
  store,
  clock,
  ttlSeconds,
  maxKeys = KEY_CACHE_MAX_KEYS,
  maxUnknown = KEY_CACHE_MAX_UNKNOWN,
  onLookup,
}: KeyCacheOptions) {
  const ttlMs = ttlSeconds * 1000;
  // Maps keep insertion order: the first entry is the oldest, dropped first when full.
  const known = new Map<string, Entry>();
  const unknown = new Map<string, Entry>();
  const reads = new Map<string, Read>();

  const evict = (ids: Parameters<KeysChangedListener>[0]) => {
    if (typeof ids === 'object' && 'userId' in ids) {
      // Every key of one user went: rows are not indexed by user, so walk them (a rare, operator's act).
      for (const [id, entry] of known) if (entry.row?.userId === ids.userId) known.delete(id);
      for (const read of reads.values()) read.stale = true;
      reads.clear();
      return;
    }
    if (ids === 'all') {
      known.clear();
      unknown.clear();
      for (const read of reads.values()) read.stale = true;
      reads.clear();
      return;
    }
    for (const id of ids as readonly string[]) {
      known.delete(id);
      unknown.delete(id);
      const read = reads.get(id);
      if (read !== undefined) {
        read.stale = true;
        reads.delete(id);
      }
    }
  };
  store.onKeysChanged(evict);

  const remember = (id: string, row: ApiKeyRow | undefined) => {
    if (ttlMs === 0) return;
    const map = row === undefined ? unknown : known;
    const bound = row === undefined ? maxUnknown : maxKeys;
    map.delete(id);
    if (map.size >= bound) map.delete(map.keys().next().value as string);
    map.set(id, { row, storedAt: clock() });
  };

  return {
    /**
     * The stored row for `id`, or undefined when there is none: at once from memory or from a store
     * that reads synchronously, as a promise when the store answers later (the hot path, a hit,
     * allocates no promise). A store's failure is thrown, or rejected, as the store gave it. `now`: the
     * caller's reading of the clock, when it has one.
     */
    find(id: string, now = clock()): ApiKeyRow | undefined | Promise<ApiKeyRow | undefined> {
      const entry = known.get(id) ?? unknown.get(id);
      let expired: ApiKeyRow | undefined;
      if (entry !== undefined) {
        if (now - entry.storedAt < ttlMs) {
          onLookup?.(true);
          return entry.row;
        }
        expired = entry.row;
        known.delete(id);
        unknown.delete(id);
      }
      onLookup?.(false); // a read joined while in flight still waits for the store
      const pending = reads.get(id);
      if (pending !== undefined) return pending.promise;
      const found = store.findKey(id);
      // A synchronous read (SQLite) is answered and kept at once: nothing can evict its id meanwhile.
      if (!(found instanceof Promise)) {
        const row = unchangedOr(expired, found);
        remember(id, row);
        return row;
      }
      const read: Read = { stale: false, promise: Promise.resolve(undefined) };
      read.promise = found.then(
        (fresh) => {
          if (reads.get(id) === read) reads.delete(id);
          // Evicted meanwhile: the key changed, so nothing of the expired row is kept.
          if (read.stale) return fresh;
          const row = unchangedOr(expired, fresh);
          remember(id, row);
          return row;
        },
        (error: unknown) => {
          if (reads.get(id) === read) reads.delete(id);
          throw error;
        },
      );
      reads.set(id, read);
      return read.promise;
    },

    evict,

    /** How many rows and unknown ids are held now. */
    size: () => ({ keys: known.size, unknown: unknown.size }),
  };
}

/**
 * The expired row itself when the store's new read says the same of the key (its last use aside,
 * taken from the read), else the read: a refresh of an unchanged key keeps what was made from its row
 * (the principal and its answers, parsed settings, this interval's usage entry) instead of making it
 * all again, and its garbage, every KEY_CACHE_SECONDS. No value made from a row reads `lastUsedAt`.
 */
function unchangedOr(expired: ApiKeyRow | undefined, read: ApiKeyRow | undefined): ApiKeyRow | undefined {
  if (expired === undefined || read === undefined || !sameKey(expired, read)) return read;
  expired.lastUsedAt = read.lastUsedAt;
  return expired;
}

/** Every field alike but `lastUsedAt`: the same values, the secret hash's same bytes. */
function sameKey(a: ApiKeyRow, b: ApiKeyRow): boolean {
  const fields = Object.keys(b) as (keyof ApiKeyRow)[];
  if (fields.length !== Object.keys(a).length) return false;
  for (const field of fields) {
    if (field === 'lastUsedAt' || a[field] === b[field]) continue;
    if (field === 'secretHash' && Buffer.compare(a.secretHash, b.secretHash) === 0) continue;
    // Anything else differs, or is an object (credits): the new read is kept.
    return false;
  }
  return true;
}
