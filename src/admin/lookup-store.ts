// The LookupStore interface: the operator's queries across every user (the users holding keys or a
// policy, every live key by id prefix or name, the overview's counts), rows out, no rules. The
// implementations are src/db/sqlite/lookups.ts and src/db/postgres/lookups.ts.
import type { ApiKeyRow, ListPosition } from '../apikeys/store';

/** A user who holds live keys or a policy. `subject`: its mapped subject, null when it has none. */
export type UserRow = {
  userId: number;
  subject: string | null;
  /** Live keys. */
  keys: number;
  /** The latest stored last use of its live keys (ms); null when none was used. */
  lastUsedAt: number | null;
  hasPolicy: boolean;
};

export type UserListQuery = { now: number; afterUserId: number | undefined; limit: number };

/**
 * Live keys newest first by (createdAt, id), strictly after `after`; with `idPrefix` only ids that
 * start with it, with `namePart` only names holding it, ASCII letters compared without case (it is
 * given in lower case).
 */
export type KeySearch = {
  now: number;
  after: ListPosition | undefined;
  limit: number;
  idPrefix?: string;
  namePart?: string;
};

export type TopKey = { keyId: string; userId: number; name: string; valid: number };
export type TopUser = { userId: number; valid: number };

export interface LookupStore {
  /** Ascending user id, strictly after `afterUserId`. */
  listUsers(query: UserListQuery): Promise<UserRow[]>;

  searchKeys(search: KeySearch): Promise<ApiKeyRow[]>;

  /** Keys live at `now`. */
  countLiveKeys(now: number): Promise<number>;

  /** Keys created (rotations included, deleted ones too) in the hours from `from` on. */
  countCreatedSince(from: number): Promise<number>;

  /** Verification answers by code in the hours from `from` on. */
  verificationsSince(from: number): Promise<Record<string, number>>;

  /**
   * The `limit` stored keys, and the `limit` users, with the most VALID verifications in the hours
   * from `from` on, most first, none with zero (one pass over those hours' usage rows for both).
   */
  topSince(from: number, limit: number): Promise<{ keys: TopKey[]; users: TopUser[] }>;
}

/** The first `limit` user ids of two ascending lists (users with keys, users with a policy), each once. */
export function firstUsers(
  withKeys: readonly number[],
  withPolicy: readonly number[],
  limit: number,
): number[] {
  return [...new Set([...withKeys, ...withPolicy])].sort((a, b) => a - b).slice(0, limit);
}

/** A row of the rankings' one query: a key (with its user and name) or a user, and its VALID count. */
export type RankedRow = {
  kind: 'key' | 'user';
  key_id: string | null;
  user_id: number;
  name: string | null;
  valid: number;
};

/** The rankings' rows as the two lists, each most first (the query's union keeps no order). */
export function rankingsOf(rows: readonly RankedRow[]): { keys: TopKey[]; users: TopUser[] } {
  const keys: TopKey[] = [];
  const users: TopUser[] = [];
  for (const row of rows) {
    if (row.kind === 'key') {
      keys.push({
        keyId: row.key_id as string,
        userId: row.user_id,
        name: row.name as string,
        valid: row.valid,
      });
    } else {
      users.push({ userId: row.user_id, valid: row.valid });
    }
  }
  const mostFirst = (a: { valid: number }, b: { valid: number }) => b.valid - a.valid;
  return { keys: keys.sort(mostFirst), users: users.sort(mostFirst) };
}
