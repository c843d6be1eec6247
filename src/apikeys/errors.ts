// What the key rules refuse, as domain errors (core/errors.ts): the edge gives each its status.
import { DomainError } from '../core/errors';

/** The key is missing, expired or another user's: never said which. */
export class KeyNotFoundError extends DomainError {
  override name = 'KeyNotFoundError';
  readonly kind = 'not-found';
  constructor() {
    super('No such key.');
  }
}

/** The caller asked to act on, or create, a key above its own level. */
export class LevelTooHighError extends DomainError {
  override name = 'LevelTooHighError';
  readonly kind = 'forbidden';
}

/** The user already holds as many live keys as allowed. */
export class KeyCapReachedError extends DomainError {
  override name = 'KeyCapReachedError';
  readonly kind = 'conflict';
  constructor(readonly cap: number) {
    super(`You already hold ${cap} live keys, the most allowed.`);
  }
}

/**
 * The caller is a key in its grace period after a rotation: it still authenticates and verifies
 * until it expires, but it may not create or rotate keys, so a leaked key cannot renew itself.
 */
export class RetiringKeyError extends DomainError {
  override name = 'RetiringKeyError';
  readonly kind = 'forbidden';
  constructor(action: string) {
    super(`This key was rotated and is retiring: it may not ${action} keys; use the key that replaced it.`);
  }
}

/**
 * A key with its own rate limit, credits or allowed addresses may not act on other keys (nor mint
 * unlimited ones).
 */
export class ConstrainedKeyError extends DomainError {
  override name = 'ConstrainedKeyError';
  readonly kind = 'forbidden';
  constructor(action: string) {
    super(
      `This key has its own rate limit, credits or allowedIps: it may not ${action} other keys; use a token or an unconstrained key.`,
    );
  }
}

/**
 * A key updating itself may only tighten: name, meta, disable itself, a lower level, an earlier
 * expiry, fewer permissions, fewer addresses.
 */
export class SelfUpdateError extends DomainError {
  override name = 'SelfUpdateError';
  readonly kind = 'forbidden';
  constructor() {
    super(
      'A key updating itself may change only its name and meta, disable itself, lower its level, bring its expiry earlier and narrow its permissions and allowedIps.',
    );
  }
}

/** A grant of permissions the caller does not hold, or that the user's policy does not allow. */
export class PermissionGrantError extends DomainError {
  override name = 'PermissionGrantError';
  readonly kind = 'forbidden';
}

/** A key updating itself may only narrow where it may be used from. */
export class AllowedIpsWideningError extends DomainError {
  override name = 'AllowedIpsWideningError';
  readonly kind = 'forbidden';
}
