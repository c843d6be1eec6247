// The rules of user policies: what a policy holds, how it is shown, and its changes. A policy's
// credits are set when it is put (their refill clock starts then), as a key's are on update. Knows no
// HTTP and no SQL.
import type { UserPolicy } from '../apikeys/model';
import type { CreditsSetting, RateLimitSetting } from '../apikeys/settings';
import { storedCredits } from '../apikeys/settings';
import { policyView } from '../apikeys/user-policy';
import type { Clock } from '../core/clock';
import { DomainError } from '../core/errors';
import type { Outbox } from '../webhooks/outbox';
import type { PolicyCache } from './cache';
import type { PolicyStore, StoredPolicy } from './store';

/** A policy as the operator puts it: all four, null for none, and permissions (absent: null). */
export type PolicyInput = {
  ratelimit: RateLimitSetting | null;
  credits: CreditsSetting | null;
  maxKeys: number | null;
  maxLevel: number | null;
  permissions?: string[] | null;
};

export const NO_POLICY: UserPolicy = Object.freeze({
  ratelimit: null,
  credits: null,
  maxKeys: null,
  maxLevel: null,
  permissions: null,
});

export class PolicyNotFoundError extends DomainError {
  override name = 'PolicyNotFoundError';
  readonly kind = 'not-found';
  constructor() {
    super('The user has no policy.');
  }
}

export type PolicyService = ReturnType<typeof createPolicyService>;

export function createPolicyService({
  store,
  cache,
  clock,
  outbox,
}: {
  store: PolicyStore;
  cache: Pick<PolicyCache, 'policyOf'>;
  clock: Clock;
  /** The webhooks' outbox: user.policy_updated, written in the change's transaction (absent: none). */
  outbox?: Pick<Outbox, 'hook' | 'committed'>;
}) {
  /** user.policy_updated's hook: the policy as GET shows it (null once removed) and who changed it. */
  const updatedHook = (by: string, policy: UserPolicy | null) =>
    outbox?.hook<number>('user.policy_updated', (userId) => ({ userId, by, policy }));
  return {
    async putPolicy(
      userId: number,
      input: PolicyInput,
      by: string,
      signal?: AbortSignal,
    ): Promise<UserPolicy> {
      const now = clock();
      const stored: StoredPolicy = {
        ratelimit: input.ratelimit,
        credits: input.credits === null ? null : storedCredits(input.credits, now),
        maxKeys: input.maxKeys,
        maxLevel: input.maxLevel,
        permissions: input.permissions ?? null,
      };
      const view = policyView(stored, now);
      const hook = updatedHook(by, view);
      await store.putPolicy(userId, stored, signal, hook);
      if (hook) outbox?.committed();
      return view;
    },

    /** The user's policy; all four null when the user has none. */
    async getPolicy(userId: number): Promise<UserPolicy> {
      // The database's copy, not the cache's: its credits are the remaining count as stored.
      const policy = await store.readPolicy(userId);
      return policy === undefined ? NO_POLICY : policyView(policy, clock());
    },

    async deletePolicy(userId: number, by: string, signal?: AbortSignal): Promise<void> {
      const hook = updatedHook(by, null);
      if (!(await store.deletePolicy(userId, signal, hook))) throw new PolicyNotFoundError();
      if (hook) outbox?.committed();
    },

    /** What key info and the key rules read: at once from memory when known. */
    policyOf: cache.policyOf,
  };
}
