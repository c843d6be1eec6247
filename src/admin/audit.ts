// The audit lines of the operator's changes that are no one key's: revoking every key of a user, and
// setting or removing a user's policy (never its values).
// (A change of one key is told through the key events, as on the other routes.) Never a secret.
import type { Logger } from '../core/log';

export type AdminAudit = ReturnType<typeof createAdminAudit>;

export function createAdminAudit(logger: Pick<Logger, 'info'>) {
  return {
    /** Every key of a user revoked at once: one line, however many keys went. */
    revokedAll: (change: { userId: number; count: number; by: string; requestId: string }) =>
      logger.info('apikeys.revoked', change),
    policySet: (change: { userId: number; by: string; requestId: string }) =>
      logger.info('policy.set', change),
    policyDeleted: (change: { userId: number; by: string; requestId: string }) =>
      logger.info('policy.deleted', change),
  };
}
