// Key events, told after each committed change, and the audit log that writes them: one JSON log
// line per change, named in `msg`. Never a secret, a token or a hash (keys are identifiers, not
// credentials). Metrics listen to the same events (metrics/metrics.ts).
import type { Logger } from '../core/log';

export type KeyChange = { key: string; userId: number; by: string; requestId: string | undefined };

export type KeyEvents = {
  created(change: KeyChange): void;
  deleted(change: KeyChange): void;
  rotated(change: KeyChange & { previousKey: string }): void;
  /** `changed` names the properties changed, never their values (meta is the owner's). */
  updated(change: KeyChange & { changed: string[] }): void;
  /** Every key of a user revoked at once (the operator's revoke-all): one event, however many went. */
  revokedAll(change: { userId: number; count: number; by: string; requestId: string }): void;
};

export type AuditLog = ReturnType<typeof createAuditLog>;

export function createAuditLog(logger: Pick<Logger, 'info'>) {
  return {
    created: (change: KeyChange) => logger.info('apikey.created', change),
    deleted: (change: KeyChange) => logger.info('apikey.deleted', change),
    rotated: (change: KeyChange & { previousKey: string }) => logger.info('apikey.rotated', change),
    updated: (change: KeyChange & { changed: string[] }) => logger.info('apikey.updated', change),
    revokedAll: (change) => logger.info('apikeys.revoked', change),
    /** Once per purge pass that removed any. */
    purged(count: number, ms: number) {
      if (count > 0) logger.info('apikeys.purged', { count, ms });
    },
  } satisfies KeyEvents & Record<string, unknown> as KeyEvents & { purged(count: number, ms: number): void };
}

/** Every listener told of each event, in order. */
export function allKeyEvents(...listeners: (KeyEvents | undefined)[]): KeyEvents {
  const present = listeners.filter((listener) => listener !== undefined);
  return {
    created: (change) => {
      for (const listener of present) listener.created(change);
    },
    deleted: (change) => {
      for (const listener of present) listener.deleted(change);
    },
    rotated: (change) => {
      for (const listener of present) listener.rotated(change);
    },
    updated: (change) => {
      for (const listener of present) listener.updated(change);
    },
    revokedAll: (change) => {
      for (const listener of present) listener.revokedAll(change);
    },
  };
}
