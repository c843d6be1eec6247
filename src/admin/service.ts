// The operator's rules: any user's keys, through the key service's own rules. The operator acts for
// the key's user as a caller of the highest level, so every rule of a token of that user holds (404
// for an expired or unknown key, the cap, the user's policy), and nothing here repeats them.
import type { ApiKeyService } from '../apikeys/service';
import type { Caller } from '../auth/caller';
import { MAX_LEVEL } from '../core/levels';
import type { Operator } from './operator-auth';

export type AdminService = ReturnType<typeof createAdminService>;

/** The operator acting for `userId`: any level, audited as the operator. */
export function actingFor(operator: Operator, userId: number): Caller {
  return { userId, level: MAX_LEVEL, by: operator.by };
}

export function createAdminService({ apikeys }: { apikeys: ApiKeyService }) {
  return {
    async getKey(operator: Operator, id: string) {
      return apikeys.getKey(actingFor(operator, await apikeys.ownerOf(id)), id);
    },
  };
}
