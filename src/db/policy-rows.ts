// A user's policy as both stores read it: the user_policies row and its user_credits row, if any.
import type { StoredPolicy } from '../policies/store';

/** The two rows of a policy as the store's StoredPolicy . */
export function storedPolicyOf(
  policy: {
    ratelimitLimit: number | null;
    ratelimitDuration: number | null;
    maxKeys: number | null;
    maxLevel: number | null;
    permissions: string | null;
  },
  credits:
    | { remaining: number; refillAmount: number | null; refillIntervalMs: number | null; refilledAt: number }
    | undefined,
): StoredPolicy {
  return {
    ratelimit:
      policy.ratelimitLimit === null || policy.ratelimitDuration === null
        ? null
        : { limit: policy.ratelimitLimit, duration: policy.ratelimitDuration },
    credits:
      credits === undefined
        ? null
        : {
            remaining: credits.remaining,
            refillAmount: credits.refillAmount,
            refillIntervalMs: credits.refillIntervalMs,
            refilledAt: credits.refilledAt,
          },
    maxKeys: policy.maxKeys,
    maxLevel: policy.maxLevel,
    permissions: policy.permissions === null ? null : (JSON.parse(policy.permissions) as string[]),
  };
}

/** The user_policies row of a policy (its credits go to user_credits). */
export function policyRow(userId: number, { ratelimit, maxKeys, maxLevel, permissions }: StoredPolicy) {
  return {
    userId,
    ratelimitLimit: ratelimit?.limit ?? null,
    ratelimitDuration: ratelimit?.duration ?? null,
    maxKeys,
    maxLevel,
    permissions: permissions === null ? null : JSON.stringify(permissions),
  };
}
