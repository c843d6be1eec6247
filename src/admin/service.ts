// The operator's rules: any user's keys, through the key service's own rules. The operator acts for
// the key's user as a caller of the highest level, so every rule a token of that user meets holds
// (404 for an expired or unknown key, the cap, the user's policy), and nothing here repeats them.

import type { CreateKeyInput, KeySummary, UserPolicy } from '../apikeys/model';
import type { ApiKeyService, KeyPatch } from '../apikeys/service';
import type { ListPosition } from '../apikeys/store';
import { policyView, type StoredPolicy } from '../apikeys/user-policy';
import type { Caller } from '../auth/caller';
import type { SubjectStore } from '../auth/subjects';
import type { Clock } from '../core/clock';
import { DomainError } from '../core/errors';
import { MAX_LEVEL } from '../core/levels';
import type { SyncOrAsync } from '../core/sync-or-async';
import type { SessionService } from '../sessions/service';
import { HOUR_MS } from '../usage/counter';
import type { Granularity, UsageService } from '../usage/service';
import type { LookupStore } from './lookup-store';
import type { Operator } from './operator-auth';

export type AdminService = ReturnType<typeof createAdminService>;

/** No user id was given to the subject (or user ids are not mapped). */
export class SubjectNotFoundError extends DomainError {
  override name = 'SubjectNotFoundError';
  readonly kind = 'not-found';
  constructor(message = 'No user id was given to that issuer and subject.') {
    super(message);
  }
}

type UsageQuery = { granularity: Granularity; since: number; until: number };

/** A user as the operator's list shows it. */
export type UserSummary = {
  userId: number;
  subject?: string;
  keys: number;
  lastUsedAt: string | null;
  policy?: UserPolicy;
};

/** What `q` of the key search asks: a key id prefix, or a part of the name (ASCII letters lower-cased). */
export type KeyFilter = { idPrefix: string } | { namePart: string } | undefined;

/** How many keys and users the overview ranks. */
export const TOP = 10;
/** The overview's windows, in whole UTC hours, the current one included. */
const DAY_HOURS = 24;
const MONTH_HOURS = 30 * 24;

/** The operator acting for `userId`: any level, any permission, audited as the operator. */
export function actingFor(operator: Operator, userId: number): Caller {
  return { userId, level: MAX_LEVEL, by: operator.by, operator: true };
}

export function createAdminService({
  apikeys,
  usage,
  subjects,
  lookups,
  policyOf,
  sessions,
  clock,
}: {
  apikeys: ApiKeyService;
  /** The queries across every user: the users, the key search, the overview's counts. */
  lookups: LookupStore;
  /** The operator's policy of a user, as key info shows it. */
  policyOf: (userId: number) => SyncOrAsync<StoredPolicy | undefined>;
  /** The console's sessions: revoke-all ends the user's. */
  sessions?: Pick<SessionService, 'endSessionsOfUser'>;
  /** With JWT_USER_IDS=mapped: the user ids given to (issuer, subject) pairs. */
  subjects: Pick<SubjectStore, 'findUserId'> | undefined;
  usage: Pick<UsageService, 'history' | 'userHistory' | 'flushPending'>;
  clock: Clock;
}) {
  /** The operator acting for the user of the live key `id` (404 when there is none). */
  const actingForOwnerOf = async (operator: Operator, id: string) =>
    actingFor(operator, await apikeys.ownerOf(id));

  return {
    async getKey(operator: Operator, id: string) {
      return apikeys.getKey(await actingForOwnerOf(operator, id), id);
    },

    listKeys(operator: Operator, userId: number, page: { limit: number; after: ListPosition | undefined }) {
      return apikeys.listKeys(actingFor(operator, userId), page);
    },

    createKey(operator: Operator, userId: number, input: CreateKeyInput, signal?: AbortSignal) {
      return apikeys.createKey(actingFor(operator, userId), input, signal);
    },

    async updateKey(operator: Operator, id: string, patch: KeyPatch, signal?: AbortSignal) {
      return apikeys.updateKey(await actingForOwnerOf(operator, id), id, patch, signal);
    },

    async revokeKey(operator: Operator, id: string, signal?: AbortSignal) {
      return apikeys.revokeKey(await actingForOwnerOf(operator, id), id, signal);
    },

    /**
     * Every key of the user, in one transaction (with their key.deleted events), then the user's
     * console sessions (an account closed: nothing of it stays open); resolves with how many keys
     * were live.
     */
    async revokeAllKeys(operator: Operator, userId: number, signal?: AbortSignal): Promise<number> {
      const deleted = await apikeys.revokeAllKeys(userId, operator.by, signal);
      await sessions?.endSessionsOfUser(userId);
      return deleted;
    },

    async keyUsage(id: string, query: UsageQuery) {
      await apikeys.ownerOf(id);
      return usage.history(id, query);
    },

    userUsage(userId: number, query: UsageQuery) {
      return usage.userHistory(userId, query);
    },

    /**
     * A page of the users that hold live keys or a policy, ascending user id. This process's usage is
     * written first, so each user's lastUsedAt is the latest its keys' rows know.
     */
    async listUsers(page: {
      limit: number;
      afterUserId: number | undefined;
    }): Promise<{ items: UserSummary[]; next: number | null }> {
      await usage.flushPending();
      const now = clock();
      const rows = await lookups.listUsers({ now, afterUserId: page.afterUserId, limit: page.limit + 1 });
      const items: UserSummary[] = [];
      for (const row of rows.slice(0, page.limit)) {
        const policy = row.hasPolicy ? await policyOf(row.userId) : undefined;
        items.push({
          userId: row.userId,
          ...(row.subject === null ? {} : { subject: row.subject }),
          keys: row.keys,
          lastUsedAt: row.lastUsedAt === null ? null : new Date(row.lastUsedAt).toISOString(),
          ...(policy === undefined ? {} : { policy: policyView(policy, now) }),
        });
      }
      const last = items.at(-1);
      return { items, next: rows.length > page.limit && last ? last.userId : null };
    },

    /** A page of every user's live keys, newest first, those `filter` asks for. */
    async searchKeys(
      filter: KeyFilter,
      page: { limit: number; after: ListPosition | undefined },
    ): Promise<{ items: KeySummary[]; next: ListPosition | null }> {
      const now = clock();
      const rows = await lookups.searchKeys({ now, after: page.after, limit: page.limit + 1, ...filter });
      const shown = rows.slice(0, page.limit);
      const last = shown.at(-1);
      const next = rows.length > page.limit && last ? { createdAt: last.createdAt, id: last.id } : null;
      return { items: await apikeys.describeKeys(shown, now), next };
    },

    /**
     * Keys alive; keys created and verifications by code over the last 24 hours and 30 days (whole
     * UTC hours, the current one included); the ten keys and users with the most VALID verifications
     * over the last 24 hours. This process's counts are written first.
     */
    async overview() {
      await usage.flushPending();
      const now = clock();
      const hour = now - (now % HOUR_MS);
      const day = hour - (DAY_HOURS - 1) * HOUR_MS;
      const month = hour - (MONTH_HOURS - 1) * HOUR_MS;
      const [keys, createdDay, createdMonth, verificationsDay, verificationsMonth, top] = await Promise.all([
        lookups.countLiveKeys(now),
        lookups.countCreatedSince(day),
        lookups.countCreatedSince(month),
        lookups.verificationsSince(day),
        lookups.verificationsSince(month),
        lookups.topSince(day, TOP),
      ]);
      return {
        keys,
        created: { day: createdDay, month: createdMonth },
        verifications: { day: verificationsDay, month: verificationsMonth },
        topKeys: top.keys.map(({ keyId, userId, name, valid }) => ({ key: keyId, userId, name, valid })),
        topUsers: top.users,
      };
    },

    /** The user id a mapped subject was given; 404 when it has none (a lookup never gives one). */
    async userIdOfSubject(issuer: string, subject: string): Promise<number> {
      if (subjects === undefined) {
        throw new SubjectNotFoundError(
          "User ids are not mapped (JWT_USER_IDS=numeric): a token's sub is its user id.",
        );
      }
      const userId = await subjects.findUserId(issuer, subject);
      if (userId === undefined) throw new SubjectNotFoundError();
      return userId;
    },
  };
}
