// What the key rules know of the operator's policy of a user (the policies folder stores and serves
// it): its maxLevel caps the levels of the user's keys, its maxKeys replaces MAX_KEYS_PER_USER, its
// permissions bound what the user's keys may be granted, and key info shows all five, read-only. Its
// rate limit and credits are shared by all the user's keys.
import type { StoredCredits } from '../limits/credits';
import type { UserPolicy } from './model';
import { creditsView, type RateLimitSetting } from './settings';

/** A user's policy as stored; null: none of that kind. Its credits are one pool for all the user's keys. */
export type StoredPolicy = {
  ratelimit: RateLimitSetting | null;
  credits: StoredCredits | null;
  maxKeys: number | null;
  maxLevel: number | null;
  /** The permissions the user's keys may hold (wildcards allowed); null: any. */
  permissions: readonly string[] | null;
};

/** A policy as answers and key info show it: the credits remaining at `now` (a due refill applied). */
export function policyView(policy: StoredPolicy, now: number): UserPolicy {
  return {
    ratelimit: policy.ratelimit,
    credits: policy.credits === null ? null : creditsView(policy.credits, now),
    maxKeys: policy.maxKeys,
    maxLevel: policy.maxLevel,
    permissions: policy.permissions === null ? null : [...policy.permissions],
  };
}
