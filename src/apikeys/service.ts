// The rules of API keys: who may create, see, rotate or delete which key, levels and permissions that
// never escalate (grants.ts), the per-user cap, expiry. Knows no HTTP framework and no SQL: it raises
// domain errors (errors.ts).
// A change takes the signal of the connection that asked for it: the store commits nothing once it
// has aborted, since nobody could receive the answer.

import type { Caller } from '../auth/caller';
import type { Clock } from '../core/clock';
import type { SyncOrAsync } from '../core/sync-or-async';
import { firstOutside } from '../network/blocks';
import type { OutboxHook } from '../webhooks/events';
import type { Outbox } from '../webhooks/outbox';
import {
  AllowedIpsWideningError,
  ConstrainedKeyError,
  KeyCapReachedError,
  KeyNotFoundError,
  LevelTooHighError,
  RetiringKeyError,
  SelfUpdateError,
} from './errors';
import { assertGrantable } from './grants';
import type { KeyCache } from './key-cache';
import type { ApiKeyView, CreateKeyInput, KeySummary } from './model';
import {
  DEFAULT_SECRET_PREFIX,
  generateKeyId,
  generateSecret,
  hashSecret,
  isWellFormedSecret,
  KEY_ID_PATTERN,
  secretMatches,
} from './secrets';
import {
  allowedIpsOf,
  type CreditsSetting,
  creditsView,
  type KeyMeta,
  lineageOf,
  metaOf,
  permissionsOf,
  type RateLimitSetting,
  rateLimitOf,
  storedCredits,
  storedList,
} from './settings';
import type { ApiKeyRow, ApiKeyStore, KeyUpdate, ListPosition } from './store';
import { policyView, type StoredPolicy } from './user-policy';

/**
 * The outcome of a key and secret: an unknown key and a wrong secret are the same answer. A wrong
 * secret for a key that exists carries its `keyId`, for the key's usage counts only (never an answer).
 */
export type KeyAuthentication =
  /** `at`: the clock's reading the key was judged at, which the rest of its verification goes by. */
  | { status: 'valid'; row: ApiKeyRow; at: number }
  | { status: 'expired'; row: ApiKeyRow; at: number }
  | { status: 'not-found'; keyId?: string };

export type ApiKeyServiceOptions = {
  store: ApiKeyStore;
  keys: Pick<KeyCache, 'find'>;
  clock: Clock;
  maxKeysPerUser: number;
  /**
   * The operator's policy of a user, when it has one (policies/cache.ts): its maxLevel caps the levels
   * of the user's keys, its maxKeys replaces `maxKeysPerUser` (the store reads it in the create's
   * transaction), and key info shows it.
   */
  policyOf?: (userId: number) => SyncOrAsync<StoredPolicy | undefined>;
  /** A key's latest use, given the stored one: the usage service adds what it has not written yet. */
  lastUsedAt?: (keyId: string, stored: number | null | undefined) => number | null;
  /** Told, before the update answers, that a lineage's rate limit was replaced or removed. */
  onRateLimitReplaced?: (lineage: string) => Promise<void> | void;
  /** SECRET_PREFIX: what every new secret starts with (default `kgs_`). */
  secretPrefix?: string;
  /** The webhooks' outbox: each change's events, written in its transaction (absent: none). */
  outbox?: Pick<Outbox, 'hook' | 'hookEach' | 'both' | 'committed'>;
};

/** Why a key.deleted was sent. */
export type DeletedReason = 'deleted' | 'revoked' | 'expired';

export type ApiKeyService = ReturnType<typeof createApiKeyService>;

export const MAX_GRACE_PERIOD_SECONDS = 30 * 24 * 3600;

/** What an update asks for, in the request's terms (expiry as seconds from now). */
export type KeyPatch = {
  name?: string;
  meta?: KeyMeta | null;
  enabled?: boolean;
  level?: number;
  expiresIn?: number;
  ratelimit?: RateLimitSetting | null;
  credits?: CreditsSetting | null;
  permissions?: string[] | null;
  allowedIps?: string[] | null;
};

export function createApiKeyService({
  store,
  keys,
  clock,
  maxKeysPerUser,
  policyOf = () => undefined,
  lastUsedAt = (_keyId, stored) => stored ?? null,
  onRateLimitReplaced,
  secretPrefix = DEFAULT_SECRET_PREFIX,
  outbox,
}: ApiKeyServiceOptions) {
  const newKey = (fields: Omit<ApiKeyRow, 'id' | 'secretHash'>): { row: ApiKeyRow; secret: string } => {
    const secret = generateSecret(secretPrefix);
    return {
      row: { id: generateKeyId(fields.createdAt), secretHash: hashSecret(secret), ...fields },
      secret,
    };
  };

  /** Key info as an event's `data` holds it (the list's shape, `by` and the event's own fields). */
  const eventData = (row: ApiKeyRow, by: string, fields: Record<string, unknown> = {}) => ({
    ...summaryOf(row, clock(), lastUsedAt(row.id, row.lastUsedAt)),
    by,
    ...fields,
  });
  /** Awaits a write, then wakes the sender when it carried messages. */
  const written = async <T>(write: Promise<T>, hook: unknown): Promise<T> => {
    const value = await write;
    if (hook !== undefined) outbox?.committed();
    return value;
  };
  /** Key info, with the latest use the usage counter knows of and the user's policy, if any. */
  const infoOf = (row: ApiKeyRow, now: number, policy: StoredPolicy | undefined): KeySummary => {
    const info = summaryOf(row, now, lastUsedAt(row.id, row.lastUsedAt));
    return policy === undefined ? info : { ...info, policy: policyView(policy, now) };
  };

  /** A level the user's policy does not allow: 403, whoever asks. */
  const assertPolicyLevel = (policy: StoredPolicy | undefined, level: number | undefined) => {
    if (policy?.maxLevel != null && level !== undefined && level > policy.maxLevel) {
      throw new LevelTooHighError(`The user's keys may have levels up to ${policy.maxLevel}, not ${level}.`);
    }
  };

  /** The caller's own live key, or 404 whether it is missing, expired or another user's. */
  async function ownLiveKey(caller: Caller, id: string, action: string): Promise<ApiKeyRow> {
    const row = await store.findKey(id);
    if (!row || row.userId !== caller.userId || row.expiresAt <= clock()) throw new KeyNotFoundError();
    if (row.level > caller.level) {
      throw new LevelTooHighError(
        `You may ${action} keys up to level ${caller.level}; this key is level ${row.level}.`,
      );
    }
    return row;
  }

  /** A retiring key acts on no key; a constrained one on no key but itself. */
  function mayActOn(caller: Caller, action: string, targetId?: string): void {
    if (caller.key === undefined) return;
    if (caller.key.retiring) throw new RetiringKeyError(action);
    if (caller.key.constrained && caller.key.id !== targetId) throw new ConstrainedKeyError(action);
  }

  return {
    /**
     * Where every key-and-secret authentication starts (the /key scheme, verify, forward-auth).
     * Both failing paths do the same work: a lookup (cached), one hash, one constant-time compare and
     * the expiry check, so an unknown key and a wrong secret take the same time. A secret of the
     * checksummed shape with a wrong checksum is refused before the lookup (secrets.ts): that says
     * nothing about any stored key.
     */
    authenticateKey(key: string, secret: string): SyncOrAsync<KeyAuthentication> {
      if (!isWellFormedSecret(secret, secretPrefix)) return NOT_FOUND;
      // A key cache hit, or a read of a synchronous store (SQLite), answers at once: no promise, and
      // no closure (written out, not through andThen, whose one call site for every caller is slow).
      // One clock read for the cache's freshness and the expiry when the row is at hand; a row read
      // from the store is judged expired or not when it arrives.
      const now = clock();
      const row = KEY_ID_PATTERN.test(key) ? keys.find(key, now) : undefined;
      return row instanceof Promise
        ? row.then((found) => authenticationOf(secret, found, clock()))
        : authenticationOf(secret, row, now);
    },

    async createKey(caller: Caller, input: CreateKeyInput, signal?: AbortSignal): Promise<ApiKeyView> {
      mayActOn(caller, 'create');
      if (input.level > caller.level) {
        throw new LevelTooHighError(`You may create keys up to level ${caller.level}, not ${input.level}.`);
      }
      const policy = await policyOf(caller.userId);
      assertPolicyLevel(policy, input.level);
      if (input.permissions !== undefined) assertGrantable(caller, policy, input.permissions, 'grant');
      const now = clock();
      const { row, secret } = newKey({
        userId: caller.userId,
        level: input.level,
        name: input.name,
        createdAt: now,
        expiresAt: now + input.expiresIn * 1000,
        enabled: input.enabled ?? true,
        meta: input.meta === undefined ? null : JSON.stringify(input.meta),
        ratelimitLimit: input.ratelimit?.limit ?? null,
        ratelimitDuration: input.ratelimit?.duration ?? null,
        credits: input.credits === undefined ? null : storedCredits(input.credits, now),
        permissions: storedList(input.permissions),
        allowedIps: storedList(input.allowedIps),
      });
      const hook = outbox?.hook<ApiKeyRow>('key.created', (inserted) => eventData(inserted, caller.by));
      const outcome = await written(store.insertKeyWithinLimit(row, maxKeysPerUser, signal, hook), hook);
      if (outcome === 'limit-reached') {
        throw new KeyCapReachedError(await capOf(caller.userId));
      }
      // The six fields, and exactly the settings the request gave.
      return {
        ...createdView(row, secret),
        ...(input.meta === undefined ? {} : { meta: input.meta }),
        ...(input.enabled === undefined ? {} : { enabled: input.enabled }),
        ...(input.ratelimit === undefined ? {} : { ratelimit: input.ratelimit }),
        ...(input.credits === undefined ? {} : { credits: input.credits }),
        ...(input.permissions === undefined ? {} : { permissions: input.permissions }),
        ...(input.allowedIps === undefined ? {} : { allowedIps: input.allowedIps }),
      };
    },

    /** Resolves with the deleted row once its removal (and its key.deleted) is committed. */
    async revokeKey(caller: Caller, id: string, signal?: AbortSignal): Promise<ApiKeyRow> {
      const row = await ownLiveKey(caller, id, 'delete');
      const hook = outbox?.hook<string>('key.deleted', () =>
        eventData(row, caller.by, { reason: 'deleted' }),
      );
      if (!(await written(store.deleteKey(id, signal, hook), hook))) throw new KeyNotFoundError();
      return row;
    },

    /**
     * Every key of the user, in one transaction, each live one's key.deleted (`reason: revoked`) in
     * it; resolves with how many were live.
     */
    revokeAllKeys(userId: number, by: string, signal?: AbortSignal): Promise<number> {
      const hook = outbox?.hookEach<ApiKeyRow[]>('key.deleted', (rows) =>
        rows.map((row) => eventData(row, by, { reason: 'revoked' })),
      );
      return written(store.deleteKeysOfUser(userId, clock(), signal, hook), hook);
    },

    /** The purge's batch: expired keys, each one's key.deleted (`reason: expired`) in its transaction. */
    deleteExpiredBatch(now: number, limit: number): Promise<number> {
      const hook = outbox?.hookEach<ApiKeyRow[]>('key.deleted', (rows) =>
        rows.map((row) => eventData(row, 'purge', { reason: 'expired' })),
      );
      return written(store.deleteExpiredBatch(now, limit, hook), hook);
    },

    /**
     * What a leak's own write carries, in its transaction (undefined: nobody subscribes): key.leaked,
     * beside key.deleted for a delete or key.updated for a disable (a notify changes the marker only).
     */
    leakHooks(
      row: ApiKeyRow,
      by: string,
      fields: { source: string; url: string | null; action: 'disabled' | 'deleted' | 'notified' },
    ): { deleted?: OutboxHook<string>; updated?: OutboxHook<ApiKeyRow> } {
      if (outbox === undefined) return {};
      const leaked = outbox.hook<ApiKeyRow>('key.leaked', (leakedRow) =>
        eventData(leakedRow, by, { ...fields, url: fields.url ?? undefined }),
      );
      if (fields.action === 'deleted') {
        return {
          deleted: outbox.both<string>(
            outbox.hook('key.deleted', () => eventData(row, by, { reason: 'deleted' })),
            leaked && (() => leaked(row)),
          ),
        };
      }
      const updated =
        fields.action === 'disabled'
          ? outbox.hook<ApiKeyRow>('key.updated', (updatedRow) =>
              eventData(updatedRow, by, { changed: ['enabled'] }),
            )
          : undefined;
      return { updated: outbox.both<ApiKeyRow>(updated, leaked) };
    },

    /** Wakes the webhook sender after a write that carried events. */
    eventsWritten(): void {
      outbox?.committed();
    },

    /** The user of the live key `id`, for the operator, who acts on any user's keys; 404 as for get. */
    async ownerOf(id: string): Promise<number> {
      const row = await store.findKey(id);
      if (!row || row.expiresAt <= clock()) throw new KeyNotFoundError();
      return row.userId;
    },

    async getKey(caller: Caller, id: string): Promise<KeySummary> {
      const row = await ownLiveKey(caller, id, 'see');
      return infoOf(row, clock(), await policyOf(row.userId));
    },

    /** One page of the caller's live keys at or below its level, newest first. */
    async listKeys(
      caller: Caller,
      { limit, after }: { limit: number; after: ListPosition | undefined },
    ): Promise<{ items: KeySummary[]; next: ListPosition | null }> {
      const now = clock();
      const rows = await store.listLiveKeys({
        userId: caller.userId,
        now,
        maxLevel: caller.level,
        after,
        limit: limit + 1,
      });
      const page = rows.slice(0, limit);
      const last = page.at(-1);
      const next = rows.length > limit && last ? { createdAt: last.createdAt, id: last.id } : null;
      const policy = await policyOf(caller.userId);
      return { items: page.map((row) => infoOf(row, now, policy)), next };
    },

    /** Key info of rows the operator found (any users'), each with its user's policy, as list shows it. */
    async describeKeys(rows: readonly ApiKeyRow[], now: number): Promise<KeySummary[]> {
      const items: KeySummary[] = [];
      for (const row of rows) items.push(infoOf(row, now, await policyOf(row.userId)));
      return items;
    },

    /**
     * Checks in the contract's order: 404, level (the key's, or the new one, above the caller's:
     * 403), then who may change what (403): a retiring key changes nothing; a constrained key no other
     * key; a key changing itself only its name and meta, disabling itself, its level downwards, its
     * expiry earlier, its permissions and addresses narrower; permissions set are a grant (grants.ts).
     * Resolves with the key as updated, and the names of the properties changed.
     */
    async updateKey(caller: Caller, id: string, patch: KeyPatch, signal?: AbortSignal) {
      const row = await ownLiveKey(caller, id, 'update');
      if (patch.level !== undefined && patch.level > caller.level) {
        throw new LevelTooHighError(`You may set levels up to ${caller.level}, not ${patch.level}.`);
      }
      const policy = await policyOf(row.userId);
      assertPolicyLevel(policy, patch.level);
      mayActOn(caller, 'update', id);
      const now = clock();
      const expiresAt = patch.expiresIn === undefined ? undefined : now + patch.expiresIn * 1000;
      if (caller.key?.id === id) {
        const loosening =
          patch.ratelimit !== undefined ||
          patch.credits !== undefined ||
          patch.enabled === true ||
          (patch.level !== undefined && patch.level > row.level) ||
          (expiresAt !== undefined && expiresAt > row.expiresAt);
        if (loosening) throw new SelfUpdateError();
        assertNarrowerAddresses(row, patch.allowedIps);
      }
      if (patch.permissions != null) assertGrantable(caller, policy, patch.permissions, 'grant');
      const update: KeyUpdate = {
        ...(patch.name === undefined ? {} : { name: patch.name }),
        ...(patch.meta === undefined
          ? {}
          : { meta: patch.meta === null ? null : JSON.stringify(patch.meta) }),
        ...(patch.enabled === undefined ? {} : { enabled: patch.enabled }),
        ...(patch.level === undefined ? {} : { level: patch.level }),
        ...(expiresAt === undefined ? {} : { expiresAt }),
        ...(patch.ratelimit === undefined ? {} : { ratelimit: patch.ratelimit }),
        ...(patch.credits === undefined
          ? {}
          : { credits: patch.credits === null ? null : storedCredits(patch.credits, now) }),
        ...(patch.permissions === undefined ? {} : { permissions: storedList(patch.permissions) }),
        ...(patch.allowedIps === undefined ? {} : { allowedIps: storedList(patch.allowedIps) }),
      };
      const changed = Object.keys(patch);
      const hook = outbox?.hook<ApiKeyRow>('key.updated', (updatedRow) =>
        eventData(updatedRow, caller.by, { changed }),
      );
      const updated = await written(store.updateKey(id, update, now, signal, hook), hook);
      if (updated === undefined) throw new KeyNotFoundError();
      if (patch.ratelimit !== undefined) await onRateLimitReplaced?.(lineageOf(updated));
      return { apikey: infoOf(updated, now, policy), row: updated, changed };
    },

    /**
     * A new key with the old one's name, level, user, expiry and settings, sharing its lineage's rate
     * limit and credits; the old one expires at min(its expiry, now + grace). Checks in the contract's
     * order: 404, level 403 (the caller's, the user's policy's maxLevel, as for a create, and the
     * permissions it copies, a grant), cap 409.
     */
    async rotateKey(caller: Caller, id: string, gracePeriodSeconds: number, signal?: AbortSignal) {
      mayActOn(caller, 'rotate', id);
      const previous = await ownLiveKey(caller, id, 'rotate');
      const policy = await policyOf(previous.userId);
      assertPolicyLevel(policy, previous.level);
      const permissions = permissionsOf(previous);
      if (permissions !== undefined) assertGrantable(caller, policy, permissions, 'rotate');
      const now = clock();
      const { row, secret } = newKey({
        userId: previous.userId,
        level: previous.level,
        name: previous.name,
        createdAt: now,
        expiresAt: previous.expiresAt,
        // The chain's first key names it: old and new share its limits and credits.
        lineage: previous.lineage ?? previous.id,
        enabled: previous.enabled ?? true,
        meta: previous.meta ?? null,
        ratelimitLimit: previous.ratelimitLimit ?? null,
        ratelimitDuration: previous.ratelimitDuration ?? null,
        permissions: previous.permissions ?? null,
        allowedIps: previous.allowedIps ?? null,
      });
      const previousExpiresAt = Math.min(previous.expiresAt, now + gracePeriodSeconds * 1000);
      const hook = outbox?.hook('key.rotated', () =>
        eventData({ ...row, credits: previous.credits }, caller.by, {
          previous: { key: previous.id, expiresAt: new Date(previousExpiresAt).toISOString() },
        }),
      );
      const outcome = await written(
        store.rotateKey(
          {
            previousId: previous.id,
            previousExpiresAt,
            next: row,
            // Without a grace period the old key stops at once, so the count does not grow.
            limit: gracePeriodSeconds > 0 ? maxKeysPerUser : undefined,
          },
          signal,
          hook,
        ),
        hook,
      );
      if (outcome === 'not-found') throw new KeyNotFoundError();
      if (outcome === 'limit-reached') throw new KeyCapReachedError(await capOf(previous.userId));
      const settings = settingsView({ ...row, credits: previous.credits }, now);
      const { enabled, ...carried } = settings;
      return {
        apikey: { ...createdView(row, secret), ...carried, ...(enabled ? {} : { enabled }) },
        previous: { key: previous.id, expiresAt: new Date(previousExpiresAt).toISOString() },
      };
    },
  };

  /** A key updating itself may only narrow its addresses: no removal, every new entry inside an old one. */
  function assertNarrowerAddresses(row: ApiKeyRow, next: readonly string[] | null | undefined): void {
    const previous = allowedIpsOf(row);
    if (next === undefined || previous === undefined) return;
    if (next === null) {
      throw new AllowedIpsWideningError(
        'A key may not remove its own allowedIps: only a token or another key of its user may.',
      );
    }
    const outside = firstOutside(next, previous);
    if (outside !== undefined) {
      throw new AllowedIpsWideningError(
        `A key may only narrow its own allowedIps: "${outside.slice(0, 64)}" is not within them.`,
      );
    }
  }

  /** The cap a refused create met: the user's policy's maxKeys, or MAX_KEYS_PER_USER. */
  async function capOf(userId: number): Promise<number> {
    return (await policyOf(userId))?.maxKeys ?? maxKeysPerUser;
  }

  function authenticationOf(secret: string, row: ApiKeyRow | undefined, now: number): KeyAuthentication {
    const matches = secretMatches(secret, row?.secretHash ?? UNKNOWN_KEY_HASH);
    const expired = (row?.expiresAt ?? 0) <= now;
    if (!row) return NOT_FOUND;
    if (!matches) return { status: 'not-found', keyId: row.id };
    return expired ? { status: 'expired', row, at: now } : { status: 'valid', row, at: now };
  }
}

const NOT_FOUND: KeyAuthentication = Object.freeze({ status: 'not-found' });

const UNKNOWN_KEY_HASH = hashSecret('no key has this secret');

function createdView(row: ApiKeyRow, secret: string): ApiKeyView {
  return {
    key: row.id,
    secret,
    level: row.level,
    expiresAt: new Date(row.expiresAt).toISOString(),
    name: row.name,
    userId: row.userId,
  };
}

/** enabled always; meta, ratelimit, credits, permissions and allowedIps when the key has them. */
function settingsView(row: ApiKeyRow, now: number) {
  const meta = metaOf(row);
  const ratelimit = rateLimitOf(row);
  const permissions = permissionsOf(row);
  const allowedIps = allowedIpsOf(row);
  return {
    enabled: row.enabled ?? true,
    ...(meta === undefined ? {} : { meta }),
    ...(ratelimit === undefined ? {} : { ratelimit }),
    ...(row.credits ? { credits: creditsView(row.credits, now) } : {}),
    ...(permissions === undefined ? {} : { permissions: [...permissions] }),
    ...(allowedIps === undefined ? {} : { allowedIps: [...allowedIps] }),
  };
}

/** Key info: never a secret or a hash. */
export function summaryOf(row: ApiKeyRow, now: number, lastUsed: number | null): KeySummary {
  const { enabled, ...settings } = settingsView(row, now);
  return {
    key: row.id,
    name: row.name,
    level: row.level,
    userId: row.userId,
    createdAt: new Date(row.createdAt).toISOString(),
    expiresAt: new Date(row.expiresAt).toISOString(),
    enabled,
    lastUsedAt: lastUsed === null ? null : new Date(lastUsed).toISOString(),
    // Shown only while it is so, as the optional settings are: the console marks such keys.
    ...(row.rotatedAt == null ? {} : { retiring: true as const }),
    ...settings,
    ...(row.leakedAt == null
      ? {}
      : { leakedAt: new Date(row.leakedAt).toISOString(), leakSource: row.leakSource ?? 'unknown' }),
  };
}
