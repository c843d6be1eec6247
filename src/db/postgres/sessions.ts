// The SessionStore on PostgreSQL: each write one transaction, so an exchange (take the code, store
// the session) is atomic on every replica: the DELETE … RETURNING of a code succeeds for one of two
// concurrent exchanges only.
import { and, eq, gt, lte, sql } from 'drizzle-orm';
import type { SessionStore } from '../../sessions/store';
import { storedSessionOf } from '../session-rows';
import type { PostgresDb } from './open';
import { consoleSessions } from './schema';
import { unavailableOr } from './unavailable';

export function createPostgresSessionStore(db: PostgresDb): SessionStore {
  const write = <T>(work: (tx: Parameters<Parameters<PostgresDb['transaction']>[0]>[0]) => Promise<T>) =>
    db
      .transaction(async (tx) => {
        await tx.execute(sql`SET LOCAL synchronous_commit TO on`);
        return work(tx);
      })
      .catch(unavailableOr);

  return {
    async insertCode(codeHash, grant, expiresAt, now) {
      await write(async (tx) => {
        await tx.delete(consoleSessions).where(lte(consoleSessions.expiresAt, now));
        await tx.insert(consoleSessions).values({ tokenHash: codeHash, kind: 'code', expiresAt, ...grant });
      });
    },

    exchangeCode(codeHash, sessionHash, now) {
      return write(async (tx) => {
        const [code] = await tx
          .delete(consoleSessions)
          .where(and(eq(consoleSessions.tokenHash, codeHash), eq(consoleSessions.kind, 'code')))
          .returning();
        if (code === undefined || code.expiresAt <= now) return undefined;
        const session = { ...storedSessionOf(code), expiresAt: now + code.sessionSeconds * 1000 };
        await tx.insert(consoleSessions).values({ tokenHash: sessionHash, kind: 'session', ...session });
        return session;
      });
    },

    async findSession(sessionHash, now) {
      const [row] = await db
        .select()
        .from(consoleSessions)
        .where(
          and(
            eq(consoleSessions.tokenHash, sessionHash),
            eq(consoleSessions.kind, 'session'),
            gt(consoleSessions.expiresAt, now),
          ),
        )
        .catch(unavailableOr);
      return row === undefined ? undefined : storedSessionOf(row);
    },

    async deleteSession(sessionHash) {
      await write((tx) => tx.delete(consoleSessions).where(eq(consoleSessions.tokenHash, sessionHash)));
    },

    async deleteSessionsOfUser(userId) {
      const rows = await write((tx) =>
        tx
          .delete(consoleSessions)
          .where(eq(consoleSessions.userId, userId))
          .returning({ hash: consoleSessions.tokenHash }),
      );
      return rows.length;
    },
  };
}
