// Audit lines: one JSON log line per committed change, named in `msg`. Written only after the commit;
// never a secret, a token or a hash (keys are identifiers, not credentials).
import type { Logger } from '../core/log';

export type AuditLog = ReturnType<typeof createAuditLog>;

type Change = { key: string; userId: number; by: string; requestId: string | undefined };

export function createAuditLog(logger: Pick<Logger, 'info'>) {
  return {
    created: (change: Change) => logger.info('apikey.created', change),
    deleted: (change: Change) => logger.info('apikey.deleted', change),
    rotated: (change: Change & { previousKey: string }) => logger.info('apikey.rotated', change),
    /** Once per purge pass that removed any. */
    purged(count: number, ms: number) {
      if (count > 0) logger.info('apikeys.purged', { count, ms });
    },
  };
}
