// The PolicyStore on SQLite: reads are prepared statements; a change goes through the key store's
// group commit, policy and credits pool in one transaction, and tells this process's listeners once
// committed (one process holds a SQLite file, so there is no other replica to tell).
import { eq, sql } from 'drizzle-orm';
import type { PolicyChangedListener, PolicyStore, StoredPolicy } from '../../policies/store';
import { policyRow, storedPolicyOf } from '../policy-rows';
import type { Db } from './open';
import { userCredits, userPolicies } from './schema';
import { type SqliteApiKeyStore, unavailableOr } from './store';
import { sqliteOutboxWriter } from './webhooks';

export function createSqlitePolicyStore(db: Db, write: SqliteApiKeyStore['write']): PolicyStore {
  const listeners = new Set<PolicyChangedListener>();
  const writeOutbox = sqliteOutboxWriter(db.$client);
  const announce = (userId: number) => {
    for (const listener of listeners) listener(userId);
  };
  // Read on every verification of a user not seen lately: prepared once (building and compiling
  // the query per read cost about 60 µs, ten times the read).
  const policyOfUser = db
    .select()
    .from(userPolicies)
    .where(eq(userPolicies.userId, sql.placeholder('userId')))
    .prepare();
  const creditsOfUser = db
    .select()
    .from(userCredits)
    .where(eq(userCredits.userId, sql.placeholder('userId')))
    .prepare();
  const read = (userId: number): StoredPolicy | undefined => {
    const policy = policyOfUser.get({ userId });
    if (policy === undefined) return undefined;
    return storedPolicyOf(policy, creditsOfUser.get({ userId }));
  };

  return {
    async readPolicy(userId) {
      try {
        return read(userId);
      } catch (error) {
        unavailableOr(error);
      }
    },

    putPolicy(userId, policy, signal, outbox) {
      const row = policyRow(userId, policy);
      const { credits } = policy;
      return write(
        () => {
          db.insert(userPolicies)
            .values(row)
            .onConflictDoUpdate({ target: userPolicies.userId, set: row })
            .run();
          if (credits === null) db.delete(userCredits).where(eq(userCredits.userId, userId)).run();
          else {
            db.insert(userCredits)
              .values({ userId, ...credits })
              .onConflictDoUpdate({ target: userCredits.userId, set: credits })
              .run();
          }
          if (outbox) writeOutbox(outbox(userId));
        },
        () => announce(userId),
        signal,
      );
    },

    deletePolicy(userId, signal, outbox) {
      return write(
        () => {
          db.delete(userCredits).where(eq(userCredits.userId, userId)).run();
          const deleted =
            db
              .delete(userPolicies)
              .where(eq(userPolicies.userId, userId))
              .returning({ userId: userPolicies.userId })
              .all().length > 0;
          if (deleted && outbox) writeOutbox(outbox(userId));
          return deleted;
        },
        (deleted) => {
          if (deleted) announce(userId);
        },
        signal,
      );
    },

    onPolicyChanged(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}
