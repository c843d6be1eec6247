// A console code's or session's row as both stores read it: the grant and its expiry, never the hash.
import type { StoredSession } from '../sessions/store';

export function storedSessionOf(row: StoredSession & { tokenHash: string; kind: string }): StoredSession {
  return {
    userId: row.userId,
    level: row.level,
    by: row.by,
    sessionSeconds: row.sessionSeconds,
    expiresAt: row.expiresAt,
  };
}
