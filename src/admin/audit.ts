// The audit lines of the operator's changes to a user's policy: set or removed (never its values).
// (A change of keys, revoke-all included, is told through the key events, as on the other routes.)
import type { Logger } from '../core/log';

export type AdminAudit = ReturnType<typeof createAdminAudit>;

export function createAdminAudit(logger: Pick<Logger, 'info'>) {
  return {
    policySet: (change: { userId: number; by: string; requestId: string }) =>
      logger.info('policy.set', change),
    policyDeleted: (change: { userId: number; by: string; requestId: string }) =>
      logger.info('policy.deleted', change),
  };
}
