// The ApiKeyStore interface: rows in, rows out, in the service's words, no rules. Every method returns
// a Promise (but the key lookup, which SQLite answers at once), so an engine whose reads are async
// (PostgreSQL) fits the same shape. A write given the `signal` of the connection that asked for it
// commits nothing once that signal has aborted (it rejects with RequestGoneError instead).
// A write given an `outbox` hook runs it inside its transaction with what it did, and inserts the
// webhook messages it answers in that same transaction (none when the write changed nothing): the
// services decide which events, the stores only write them.
// The implementations are src/db/sqlite/store.ts and src/db/postgres/store.ts.
import { DomainError } from '../core/errors';
import type { CreditPools, PoolsTake, StoredCredits } from '../limits/credits';
import type { OutboxHook } from '../webhooks/events';

export type { StoredCredits };

/** One stored key. `secretHash` is the SHA-256 of the secret; the secret itself is never stored. */
export type ApiKeyRow = {
  id: string;
  secretHash: Uint8Array;
  userId: number;
  level: number;
  name: string;
  /** Milliseconds since the epoch. */
  createdAt: number;
  expiresAt: number;
  /** The first key of its rotation chain, whose limits and credits it shares; null (or absent): itself. */
  lineage?: string | null;
  /** When it was rotated out: it is retiring until it expires. Null (or absent) for a key in service. */
  rotatedAt?: number | null;
  /** False: it authenticates nothing (absent: true). */
  enabled?: boolean;
  /** The owner's metadata as compact JSON text; null (or absent): none. */
  meta?: string | null;
  /** At most `ratelimitLimit` verifications per `ratelimitDuration` seconds; null (or absent): none. */
  ratelimitLimit?: number | null;
  ratelimitDuration?: number | null;
  /** What it may do: a JSON array of permission names (wildcards allowed); null (or absent): none. */
  permissions?: string | null;
  /** Where it may be used from: a JSON array of addresses and CIDR blocks; null (or absent): anywhere. */
  allowedIps?: string | null;
  /** The latest use, as the usage flush last wrote it (ms); null: never used. */
  lastUsedAt?: number | null;
  /** The credits of its lineage (one pool per lineage), as stored: read with the key, written on create and update. */
  credits?: StoredCredits | null;
  /** When its secret was first reported leaked (ms), and the report's source; null (or absent): never. */
  leakedAt?: number | null;
  leakSource?: string | null;
  /** What its credits were last set to, and when (the cycle that began then began with that). */
  creditsSet?: { remaining: number; at: number } | null;
};

/** What an update changes; an absent property stays as it is, a null one is removed. */
export type KeyUpdate = {
  name?: string;
  meta?: string | null;
  enabled?: boolean;
  level?: number;
  expiresAt?: number;
  ratelimit?: { limit: number; duration: number } | null;
  credits?: StoredCredits | null;
  /** JSON text, as the row holds them; null removes them. */
  permissions?: string | null;
  allowedIps?: string | null;
  /** The leak marker (leaks/service.ts). */
  leakedAt?: number;
  leakSource?: string;
};

/** A position in a user's list of keys, newest first: the last item of the previous page. */
export type ListPosition = { createdAt: number; id: string };

export type ListQuery = {
  userId: number;
  /** Only keys that expire after this instant. */
  now: number;
  /** Only keys at or below this level. */
  maxLevel: number;
  after: ListPosition | undefined;
  limit: number;
};

export type Rotation = {
  previousId: string;
  /** The previous key's new expiry (at most its current one). */
  previousExpiresAt: number;
  next: ApiKeyRow;
  /**
   * Refuse when the user already holds this many live keys at `next.createdAt` (or their policy's
   * maxKeys, which replaces it); undefined: no cap.
   */
  limit: number | undefined;
};

export type RotationOutcome = 'rotated' | 'not-found' | 'limit-reached';

/**
 * Called with the ids a committed write inserted, deleted, rotated or purged (here or, on a shared
 * database, on another replica), with `{ userId }` when every key of that user went at once, or with
 * 'all' when changes may have been missed.
 */
export type KeysChangedListener = (ids: readonly string[] | 'all' | { readonly userId: number }) => void;

export interface ApiKeyStore {
  /**
   * The row, at once where the engine reads synchronously (SQLite: one lookup by primary key, no
   * promise for the key cache to wait on), else as a promise (PostgreSQL). Failures are thrown, or
   * rejected, as `StoreUnavailableError` when the database cannot answer. For an id no key has, it
   * reads, joins and decodes another stored key all the same (the nearest id below, else the newest)
   * and answers undefined: an unknown id takes the time a known one does, so a wrong secret and an
   * unknown key cannot be told apart by the time of an uncached lookup.
   */
  findKey(id: string): ApiKeyRow | undefined | Promise<ApiKeyRow | undefined>;

  /**
   * Every stored key (expired ones too) whose secret hashes to one of `hashes` (SHA-256, as
   * `secretHash`), found by the index on the hash: a leaked secret names no key.
   */
  findKeysBySecretHashes(hashes: readonly Uint8Array[]): Promise<ApiKeyRow[]>;

  /** Newest first by (createdAt, id), strictly after `after`. */
  listLiveKeys(query: ListQuery): Promise<ApiKeyRow[]>;

  /**
   * Inserts unless the user already holds `limit` live keys (or their policy's maxKeys, which replaces
   * it); the policy's read, the count and the insert are one transaction.
   */
  insertKeyWithinLimit(
    row: ApiKeyRow,
    limit: number,
    signal?: AbortSignal,
    outbox?: OutboxHook<ApiKeyRow>,
  ): Promise<'inserted' | 'limit-reached'>;

  /** Resolves true when the key existed and its removal is committed. */
  deleteKey(id: string, signal?: AbortSignal, outbox?: OutboxHook<string>): Promise<boolean>;

  /**
   * In one transaction: the previous key (still live at `next.createdAt`) gets its new expiry and is
   * marked rotated at `next.createdAt`, and `next` is inserted; either both are committed or neither.
   */
  rotateKey(
    rotation: Rotation,
    signal?: AbortSignal,
    outbox?: OutboxHook<Rotation>,
  ): Promise<RotationOutcome>;

  /**
   * In one transaction: the key (still live at `now`) gets `update`; its lineage's credits are
   * replaced or removed when `update.credits` says so. Resolves with the updated row, or undefined
   * when the key is gone or expired. Other replicas hear of it as of a delete.
   */
  updateKey(
    id: string,
    update: KeyUpdate,
    now: number,
    signal?: AbortSignal,
    outbox?: OutboxHook<ApiKeyRow>,
  ): Promise<ApiKeyRow | undefined>;

  /**
   * Takes `cost` from every pool of `pools` (a key's lineage's credits, its user's policy's) in one
   * transaction of guarded writes (a due refill applied in the same write), resolving once it is
   * committed: the binding pool's credits after the take, or, when a pool does not cover `cost`, its
   * refusal with its credits as they are, and nothing taken from any pool. Undefined when none of
   * the pools has credits.
   */
  takeCredits(pools: CreditPools, cost: number, now: number): Promise<PoolsTake | undefined>;

  /**
   * In one transaction: every key of the user (expired ones too), their credits and usage rows.
   * Resolves with how many of them were live at `now`. Other replicas hear of it as one change of
   * the user's keys, not one per key. `outbox` is given the rows of the keys that were live.
   */
  deleteKeysOfUser(
    userId: number,
    now: number,
    signal?: AbortSignal,
    outbox?: OutboxHook<ApiKeyRow[]>,
  ): Promise<number>;

  /**
   * Deletes up to `limit` keys that expired at or before `now`; resolves with how many. `outbox` is
   * given their rows.
   */
  deleteExpiredBatch(now: number, limit: number, outbox?: OutboxHook<ApiKeyRow[]>): Promise<number>;

  /**
   * `listener` runs synchronously right after each commit that changed keys, before the writers'
   * promises resolve. Returns a function that removes it.
   */
  onKeysChanged(listener: KeysChangedListener): () => void;

  /** Every queued write committed or rejected. */
  drained(): Promise<void>;

  /** True once the database answers. */
  ping(): Promise<boolean>;

  /** Waits for queued writes, then closes the database. */
  close(): Promise<void>;
}

/**
 * The database cannot take the request right now (unreachable, locked, full, read-only): it may
 * succeed later, so the HTTP layer answers 503. Each store turns its engine's errors into this one.
 */
export class StoreUnavailableError extends DomainError {
  override name = 'StoreUnavailableError';
  readonly kind = 'unavailable';
  constructor(
    /** The engine's own code, for the log line. */
    readonly code: string,
    options?: { cause?: unknown },
  ) {
    super(`the database is unavailable (${code})`, options);
  }
}
