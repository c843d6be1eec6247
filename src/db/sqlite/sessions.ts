// The SessionStore on SQLite: reads are prepared statements; writes go through the key store's group
// commit, so an exchange (take the code, store the session) is one transaction.
import { and, eq, gt, lte, sql } from 'drizzle-orm';
import type { SessionStore } from '../../sessions/store';
import { storedSessionOf } from '../session-rows';
import type { Db } from './open';
import { consoleSessions } from './schema';
import { type SqliteApiKeyStore, unavailableOr } from './store';

export function createSqliteSessionStore(db: Db, write: SqliteApiKeyStore['write']): SessionStore {
  const sessionOf = db
    .select()
    .from(consoleSessions)
    .where(
      and(
        eq(consoleSessions.tokenHash, sql.placeholder('hash')),
        eq(consoleSessions.kind, 'session'),
        gt(consoleSessions.expiresAt, sql.placeholder('now')),
      ),
    )
    .prepare();

  return {
    insertCode(codeHash, grant, expiresAt, now) {
      return write(() => {
        db.delete(consoleSessions).where(lte(consoleSessions.expiresAt, now)).run();
        db.insert(consoleSessions)
          .values({ tokenHash: codeHash, kind: 'code', expiresAt, ...grant })
          .run();
      });
    },

    exchangeCode(codeHash, sessionHash, now) {
      return write(() => {
        const [code] = db
          .delete(consoleSessions)
          .where(and(eq(consoleSessions.tokenHash, codeHash), eq(consoleSessions.kind, 'code')))
          .returning()
          .all();
        if (code === undefined || code.expiresAt <= now) return undefined;
        const session = { ...storedSessionOf(code), expiresAt: now + code.sessionSeconds * 1000 };
        db.insert(consoleSessions)
          .values({ tokenHash: sessionHash, kind: 'session', ...session })
          .run();
        return session;
      });
    },

    async findSession(sessionHash, now) {
      try {
        const row = sessionOf.get({ hash: sessionHash, now });
        return row === undefined ? undefined : storedSessionOf(row);
      } catch (error) {
        unavailableOr(error);
      }
    },

    async deleteSession(sessionHash) {
      await write(() => {
        db.delete(consoleSessions).where(eq(consoleSessions.tokenHash, sessionHash)).run();
      });
    },

    deleteSessionsOfUser(userId) {
      return write(
        () =>
          db
            .delete(consoleSessions)
            .where(eq(consoleSessions.userId, userId))
            .returning({ hash: consoleSessions.tokenHash })
            .all().length,
      );
    },
  };
}
