// Nobody grants what it does not hold: the rules for the permissions a create, an update or a
// rotation gives a key. A key grants only what its own permissions cover (a key without any grants
// none); a token any, and the operator any; and the user's policy, when it lists permissions, binds
// every grant but the operator's. No HTTP, no SQL: refusals are domain errors (403).
import type { Caller } from '../auth/caller';
import { firstUngranted, heldPermissions } from '../permissions/held';
import { PermissionGrantError } from './errors';
import type { StoredPolicy } from './user-policy';

/** Throws unless `caller` may give a key every permission of `granted` (for the user of `policy`). */
export function assertGrantable(
  caller: Caller,
  policy: StoredPolicy | undefined,
  granted: readonly string[],
  action: 'grant' | 'rotate',
): void {
  if (caller.operator) return;
  if (caller.key !== undefined) {
    const ungranted = firstUngranted(heldPermissions(caller.key.permissions), granted);
    if (ungranted !== undefined) {
      throw new PermissionGrantError(
        action === 'rotate'
          ? `This key may not rotate a key that holds "${ungranted}": it does not hold it itself.`
          : `This key may not grant "${ungranted}": a key grants only permissions its own cover.`,
      );
    }
  }
  if (policy?.permissions != null) {
    const ungranted = firstUngranted(heldPermissions(policy.permissions), granted);
    if (ungranted !== undefined) {
      throw new PermissionGrantError(
        `The user's policy does not allow the permission "${ungranted}" on its keys.`,
      );
    }
  }
}
