// The SubjectStore on SQLite: a known pair is read at once; a new one is inserted through the key
// store's group commit (one writer, so the insert cannot race another), and AUTOINCREMENT keeps an id
// from ever being given twice, even after its row is gone.
import { and, eq, sql } from 'drizzle-orm';
import type { SubjectStore, UserIdMode } from '../../auth/subjects';
import type { Db } from './open';
import { apiKeys, settings, subjects } from './schema';
import { type SqliteApiKeyStore, unavailableOr } from './store';

/** The row of `settings` that records the user-id mode. */
const MODE_SETTING = 'user_ids';

export function createSqliteSubjectStore(db: Db, write: SqliteApiKeyStore['write']): SubjectStore {
  const findUserId = db
    .select({ userId: subjects.userId })
    .from(subjects)
    .where(
      and(eq(subjects.issuer, sql.placeholder('issuer')), eq(subjects.subject, sql.placeholder('subject'))),
    )
    .prepare();
  const insertOrRead = db
    .insert(subjects)
    .values({ issuer: sql.placeholder('issuer'), subject: sql.placeholder('subject') })
    .onConflictDoUpdate({
      target: [subjects.issuer, subjects.subject],
      set: { issuer: sql`excluded.issuer` },
    })
    .returning({ userId: subjects.userId })
    .prepare();
  const findSubject = db
    .select({ subject: subjects.subject })
    .from(subjects)
    .where(eq(subjects.userId, sql.placeholder('userId')))
    .prepare();
  const readMode = db
    .select({ value: settings.value })
    .from(settings)
    .where(eq(settings.name, MODE_SETTING))
    .prepare();
  const anyKey = db.select({ id: apiKeys.id }).from(apiKeys).limit(1).prepare();
  const writeMode = db
    .insert(settings)
    .values({ name: MODE_SETTING, value: sql.placeholder('value') })
    .onConflictDoUpdate({ target: settings.name, set: { value: sql`excluded.value` } })
    .prepare();

  const orUnavailable = <T>(query: () => T): T => {
    try {
      return query();
    } catch (error) {
      return unavailableOr(error);
    }
  };

  return {
    async userIdOf(issuer, subject) {
      const known = orUnavailable(() => findUserId.get({ issuer, subject }));
      if (known !== undefined) return known.userId;
      return write(() => (insertOrRead.get({ issuer, subject }) as { userId: number }).userId);
    },

    async findUserId(issuer, subject) {
      return orUnavailable(() => findUserId.get({ issuer, subject }))?.userId;
    },

    async subjectOf(userId) {
      return orUnavailable(() => findSubject.get({ userId }))?.subject;
    },

    // At start, before any request: a transaction of its own, not one of the group commit's batches
    // (whose count and sizes the metrics report as the requests' writes).
    async recordMode(mode) {
      const record = db.$client.transaction((): UserIdMode | undefined => {
        const stored = readMode.get()?.value as UserIdMode | undefined;
        const holdsKeys = anyKey.get() !== undefined;
        const recorded = stored ?? (holdsKeys ? 'numeric' : undefined);
        if (holdsKeys && recorded !== mode) return recorded;
        if (stored !== mode) writeMode.run({ value: mode });
        return undefined;
      });
      return orUnavailable(() => record.immediate());
    },
  };
}
