// The PolicyStore interface: the operator's user policies, rows in, rows out, no rules. The
// implementations are src/db/sqlite/policies.ts and src/db/postgres/policies.ts. A policy's max_keys
// is also read by the key stores, inside each create's and rotation's transaction.
import type { StoredPolicy } from '../apikeys/user-policy';
import type { OutboxHook } from '../webhooks/events';

export type { StoredPolicy };

/** Told of the user whose policy a committed write changed (here or on another replica), or 'all'. */
export type PolicyChangedListener = (userId: number | 'all') => void;

export interface PolicyStore {
  /** The user's policy, or undefined when the user has none. */
  readPolicy(userId: number): Promise<StoredPolicy | undefined>;

  /**
   * In one transaction: replaces the user's policy and its credits pool (removed when null), and
   * inserts the messages `outbox` answers.
   */
  putPolicy(
    userId: number,
    policy: StoredPolicy,
    signal?: AbortSignal,
    outbox?: OutboxHook<number>,
  ): Promise<void>;

  /** Removes the policy and its credits (and `outbox`'s messages, when there was one); true when there was one. */
  deletePolicy(userId: number, signal?: AbortSignal, outbox?: OutboxHook<number>): Promise<boolean>;

  /** `listener` runs right after each commit that changed a policy. Returns what removes it. */
  onPolicyChanged(listener: PolicyChangedListener): () => void;
}
