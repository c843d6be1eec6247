// The SubjectStore on PostgreSQL, for any number of replicas: a known pair is one read; a new one is
// one upsert that returns the id whoever inserted it (ON CONFLICT … DO UPDATE locks and returns the
// winner's row, where DO NOTHING would return none to the loser). The sequence never hands out an id
// twice; an id a losing insert drew is skipped, never reused.
import { and, eq, sql } from 'drizzle-orm';
import type { SubjectStore, UserIdMode } from '../../auth/subjects';
import type { PostgresDb } from './open';
import { apiKeys, settings, subjects } from './schema';
import { unavailableOr } from './unavailable';

/** The row of `settings` that records the user-id mode. */
const MODE_SETTING = 'user_ids';
/** Replicas starting together record the mode one at a time (pg_advisory_xact_lock's key). */
const MODE_LOCK = 0x6b67_7569; // "kgui"

export function createPostgresSubjectStore(db: PostgresDb): SubjectStore {
  /** One transaction committed durably whatever the server's default, as every key write is. */
  const durably = <T>(work: (tx: Parameters<Parameters<PostgresDb['transaction']>[0]>[0]) => Promise<T>) =>
    db
      .transaction(async (tx) => {
        await tx.execute(sql`SET LOCAL synchronous_commit TO on`);
        return work(tx);
      })
      .catch(unavailableOr);

  const findUserId = async (issuer: string, subject: string) => {
    const [known] = await db
      .select({ userId: subjects.userId })
      .from(subjects)
      .where(and(eq(subjects.issuer, issuer), eq(subjects.subject, subject)))
      .catch(unavailableOr);
    return known?.userId;
  };

  return {
    findUserId,

    async userIdOf(issuer, subject) {
      const known = await findUserId(issuer, subject);
      if (known !== undefined) return known;
      const [given] = await durably((tx) =>
        tx
          .insert(subjects)
          .values({ issuer, subject })
          .onConflictDoUpdate({
            target: [subjects.issuer, subjects.subject],
            set: { issuer: sql`excluded.issuer` },
          })
          .returning({ userId: subjects.userId }),
      );
      return (given as { userId: number }).userId;
    },

    async subjectOf(userId) {
      const [row] = await db
        .select({ subject: subjects.subject })
        .from(subjects)
        .where(eq(subjects.userId, userId))
        .catch(unavailableOr);
      return row?.subject;
    },

    recordMode(mode) {
      return durably(async (tx) => {
        await tx.execute(sql`SELECT pg_advisory_xact_lock(${MODE_LOCK})`);
        const [stored] = await tx
          .select({ value: settings.value })
          .from(settings)
          .where(eq(settings.name, MODE_SETTING));
        const holdsKeys = (await tx.select({ id: apiKeys.id }).from(apiKeys).limit(1)).length > 0;
        const recorded = (stored?.value as UserIdMode | undefined) ?? (holdsKeys ? 'numeric' : undefined);
        if (holdsKeys && recorded !== mode) return recorded;
        if (stored?.value !== mode) {
          await tx
            .insert(settings)
            .values({ name: MODE_SETTING, value: mode })
            .onConflictDoUpdate({ target: settings.name, set: { value: mode } });
        }
        return undefined;
      });
    },
  };
}
