// The PolicyStore on PostgreSQL: each change is one transaction (COMMIT returned before its promise
// resolves) that NOTIFYs the other replicas on its own channel, naming the user; each replica LISTENs
// and tells its listeners (the policy cache), so a change reaches every replica within a second.
import { eq, sql } from 'drizzle-orm';
import { RequestGoneError } from '../../core/errors';
import type { PolicyChangedListener, PolicyStore } from '../../policies/store';
import { policyRow, storedPolicyOf } from '../policy-rows';
import type { PostgresDb } from './open';
import { userCredits, userPolicies } from './schema';
import { unavailableOr } from './unavailable';
import { insertOutbox } from './webhooks';

/** The NOTIFY channel: a payload is the sending replica's id, a space, and the user id. */
export const POLICIES_CHANNEL = 'keygate_policies';

export async function createPostgresPolicyStore(
  db: PostgresDb,
  { listen }: { listen: boolean },
): Promise<PolicyStore> {
  const listeners = new Set<PolicyChangedListener>();
  const announce = (userId: number | 'all') => {
    for (const listener of listeners) listener(userId);
  };
  const replicaId = crypto.randomUUID();
  /** One transaction, committed only while the request's connection is open (as the key store's). */
  const write = <T>(
    work: (tx: Parameters<Parameters<PostgresDb['transaction']>[0]>[0]) => Promise<T>,
    request?: AbortSignal,
  ) =>
    db
      .transaction(async (tx) => {
        await tx.execute(sql`SET LOCAL synchronous_commit TO on`);
        const value = await work(tx);
        if (request?.aborted) throw new RequestGoneError();
        return value;
      })
      .catch(unavailableOr);
  const notify = (tx: { execute: PostgresDb['execute'] }, userId: number) =>
    tx.execute(sql`SELECT pg_notify(${POLICIES_CHANNEL}, ${`${replicaId} ${userId}`})`);

  if (listen) {
    let subscribed = false;
    await db.$client
      .listen(
        POLICIES_CHANNEL,
        (payload) => {
          const [sender, userId] = payload.split(' ');
          if (sender !== replicaId && userId !== undefined) announce(Number(userId));
        },
        () => {
          // After a reconnect, notifications sent meanwhile are lost: forget every cached policy.
          if (subscribed) announce('all');
          subscribed = true;
        },
      )
      .catch(unavailableOr);
  }

  return {
    async readPolicy(userId) {
      const [policy] = await db
        .select()
        .from(userPolicies)
        .where(eq(userPolicies.userId, userId))
        .catch(unavailableOr);
      if (policy === undefined) return undefined;
      const [credits] = await db
        .select()
        .from(userCredits)
        .where(eq(userCredits.userId, userId))
        .catch(unavailableOr);
      return storedPolicyOf(policy, credits);
    },

    async putPolicy(userId, policy, signal, outbox) {
      const row = policyRow(userId, policy);
      const { credits } = policy;
      await write(async (tx) => {
        await tx
          .insert(userPolicies)
          .values(row)
          .onConflictDoUpdate({ target: userPolicies.userId, set: row });
        if (credits === null) await tx.delete(userCredits).where(eq(userCredits.userId, userId));
        else {
          await tx
            .insert(userCredits)
            .values({ userId, ...credits })
            .onConflictDoUpdate({ target: userCredits.userId, set: credits });
        }
        await notify(tx, userId);
        if (outbox) await insertOutbox(tx, outbox(userId));
      }, signal);
      announce(userId);
    },

    async deletePolicy(userId, signal, outbox) {
      const deleted = await write(async (tx) => {
        await tx.delete(userCredits).where(eq(userCredits.userId, userId));
        const gone = await tx
          .delete(userPolicies)
          .where(eq(userPolicies.userId, userId))
          .returning({ userId: userPolicies.userId });
        if (gone.length > 0) await notify(tx, userId);
        if (gone.length > 0 && outbox) await insertOutbox(tx, outbox(userId));
        return gone.length > 0;
      }, signal);
      if (deleted) announce(userId);
      return deleted;
    },

    onPolicyChanged(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}
