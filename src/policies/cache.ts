// User policies kept in memory, so a verification or a create asks the database only for a user it
// has not seen lately: `policyOf` answers at once when the policy (or its absence) is known. Evicted
// at once on this replica when a policy changes, and on the others when their store hears of it;
// KEY_CACHE_SECONDS bounds staleness should a notification be lost, as for keys.
import type { Clock } from '../core/clock';
import type { SyncOrAsync } from '../core/sync-or-async';
import type { PolicyStore, StoredPolicy } from './store';

export const POLICY_CACHE_MAX_USERS = 50_000;

export type PolicyCache = ReturnType<typeof createPolicyCache>;

type Entry = { policy: StoredPolicy | undefined; storedAt: number };
/** A read in flight; `stale` once its user was evicted meanwhile, so its answer must not be kept. */
type Read = { promise: Promise<StoredPolicy | undefined>; stale: boolean };

export function createPolicyCache({
  store,
  clock,
  ttlSeconds,
  maxUsers = POLICY_CACHE_MAX_USERS,
}: {
  store: Pick<PolicyStore, 'readPolicy' | 'onPolicyChanged'>;
  clock: Clock;
  /** 0: every lookup reads the store. */
  ttlSeconds: number;
  maxUsers?: number;
}) {
  const ttlMs = ttlSeconds * 1000;
  const known = new Map<number, Entry>();
  const reads = new Map<number, Read>();

  const evict = (userId: number | 'all') => {
    const gone = userId === 'all' ? [...reads.keys()] : [userId];
    if (userId === 'all') known.clear();
    else known.delete(userId);
    for (const id of gone) {
      const read = reads.get(id);
      if (read !== undefined) {
        read.stale = true;
        reads.delete(id);
      }
    }
  };
  store.onPolicyChanged(evict);

  return {
    /**
     * The user's policy, or undefined when the user has none: at once when known, else a promise.
     * `now`: the caller's reading of the clock, when it has one.
     */
    policyOf(userId: number, now = clock()): SyncOrAsync<StoredPolicy | undefined> {
      const entry = known.get(userId);
      if (entry !== undefined) {
        if (now - entry.storedAt < ttlMs) return entry.policy;
        known.delete(userId);
      }
      const pending = reads.get(userId);
      if (pending !== undefined) return pending.promise;
      const read: Read = { stale: false, promise: Promise.resolve(undefined) };
      read.promise = store.readPolicy(userId).then(
        (policy) => {
          if (reads.get(userId) === read) reads.delete(userId);
          if (!read.stale && ttlMs > 0) {
            if (known.size >= maxUsers) known.delete(known.keys().next().value as number);
            known.set(userId, { policy, storedAt: clock() });
          }
          return policy;
        },
        (error: unknown) => {
          if (reads.get(userId) === read) reads.delete(userId);
          throw error;
        },
      );
      reads.set(userId, read);
      return read.promise;
    },

    evict,
  };
}
