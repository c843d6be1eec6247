// The operator's rules: any user's keys, through the key service's own rules. The operator acts for
// the key's user as a caller of the highest level, so every rule a token of that user meets holds
// (404 for an expired or unknown key, the cap, the user's policy), and nothing here repeats them.

import type { CreateKeyInput } from '../apikeys/model';
import type { ApiKeyService, KeyPatch } from '../apikeys/service';
import type { ListPosition } from '../apikeys/store';
import type { Caller } from '../auth/caller';
import type { SubjectStore } from '../auth/subjects';
import { DomainError } from '../core/errors';
import { MAX_LEVEL } from '../core/levels';
import type { Granularity, UsageService } from '../usage/service';
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

/** The operator acting for `userId`: any level, any permission, audited as the operator. */
export function actingFor(operator: Operator, userId: number): Caller {
  return { userId, level: MAX_LEVEL, by: operator.by, operator: true };
}

export function createAdminService({
  apikeys,
  usage,
  subjects,
}: {
  apikeys: ApiKeyService;
  /** With JWT_USER_IDS=mapped: the user ids given to (issuer, subject) pairs. */
  subjects: Pick<SubjectStore, 'findUserId'> | undefined;
  usage: Pick<UsageService, 'history' | 'userHistory'>;
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

    /** Every key of the user, in one transaction; resolves with how many were live. */
    revokeAllKeys(operator: Operator, userId: number, signal?: AbortSignal): Promise<number> {
      return apikeys.revokeAllKeys(userId, operator.by, signal);
    },

    async keyUsage(id: string, query: UsageQuery) {
      await apikeys.ownerOf(id);
      return usage.history(id, query);
    },

    userUsage(userId: number, query: UsageQuery) {
      return usage.userHistory(userId, query);
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
