// Subjects that are not numbers (JWT_USER_IDS=mapped): each distinct pair (issuer, subject) an
// identity provider names gets a user id of keygate's own, stored in the database on first use and
// never reused. The SubjectStore is the storage side (src/db/sqlite/subjects.ts and
// src/db/postgres/subjects.ts); `cachedSubjects` keeps both directions in memory, since a pair and its
// id never change once assigned.
import { andThen, type SyncOrAsync } from '../core/sync-or-async';

/** `numeric`: `sub` is the user id. `mapped`: `sub` (with `iss`) is looked up, or given, a user id. */
export const USER_ID_MODES = ['numeric', 'mapped'] as const;
export type UserIdMode = (typeof USER_ID_MODES)[number];

export interface SubjectStore {
  /**
   * The user id of (issuer, subject), given on first use: inserted if absent, then read, so two
   * replicas meeting a new subject at the same moment get the same id. Rejects with the store's
   * StoreUnavailableError when the database cannot answer.
   */
  userIdOf(issuer: string, subject: string): Promise<number>;

  /** The user id (issuer, subject) was given, without giving one: undefined when it has none. */
  findUserId(issuer: string, subject: string): Promise<number | undefined>;

  /** The subject a user id was given to; undefined for a user id no subject holds. */
  subjectOf(userId: number): Promise<string | undefined>;

  /**
   * Records `mode` as the database's user-id mode, unless the database holds keys under the other
   * one: then that mode is returned and nothing changes. A database with keys and no record holds
   * numeric user ids (the only kind there was before the mode was recorded).
   */
  recordMode(mode: UserIdMode): Promise<UserIdMode | undefined>;
}

/** Pairs (and user ids) remembered in each direction; the oldest is forgotten first. */
export const SUBJECT_CACHE_SIZE = 100_000;

export type CachedSubjects = {
  userIdOf(issuer: string, subject: string): SyncOrAsync<number>;
  /** At once when remembered, else from the store. */
  subjectOf(userId: number): SyncOrAsync<string | undefined>;
};

export function cachedSubjects(store: SubjectStore, size = SUBJECT_CACHE_SIZE): CachedSubjects {
  const ids = new Map<string, number>();
  const subjects = new Map<number, string>();
  // A first request for a new pair, asked again before the first answer came back, waits for it.
  const pending = new Map<string, Promise<number>>();
  const remember = (pair: string, userId: number, subject: string) => {
    if (ids.size >= size) ids.delete(ids.keys().next().value as string);
    if (subjects.size >= size) subjects.delete(subjects.keys().next().value as number);
    ids.set(pair, userId);
    subjects.set(userId, subject);
  };
  return {
    userIdOf(issuer, subject) {
      // Unambiguous: a subject or issuer with NUL is refused before it gets here (token-users.ts).
      const pair = `${issuer}\u0000${subject}`;
      const known = ids.get(pair);
      if (known !== undefined) return known;
      let asked = pending.get(pair);
      if (asked === undefined) {
        asked = store.userIdOf(issuer, subject).then(
          (userId) => {
            pending.delete(pair);
            remember(pair, userId, subject);
            return userId;
          },
          (error: unknown) => {
            pending.delete(pair);
            throw error;
          },
        );
        pending.set(pair, asked);
      }
      return asked;
    },
    subjectOf(userId) {
      const known = subjects.get(userId);
      if (known !== undefined) return known;
      // Not remembered when absent: a user id no subject holds yet may be given to one later.
      return andThen(store.subjectOf(userId), (subject) => {
        if (subject !== undefined) {
          if (subjects.size >= size) subjects.delete(subjects.keys().next().value as number);
          subjects.set(userId, subject);
        }
        return subject;
      });
    },
  };
}
