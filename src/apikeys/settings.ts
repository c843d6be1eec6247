// A key's settings beyond name, level and expiry: free-form metadata, enabled, its own rate limit,
// its credits, what it may do (permissions) and where from (allowedIps); how they are stored and how
// key info shows them. No HTTP, no SQL.
import { objectSlot } from '../core/object-slots';
import { effectiveCredits } from '../limits/credits';
import { type AddressList, addressList } from '../network/blocks';
import { type HeldPermissions, heldPermissions } from '../permissions/held';
import type { ApiKeyRow, StoredCredits } from './store';

export type RateLimitSetting = { limit: number; duration: number };
export type CreditsSetting = { remaining: number; refill?: { amount: number; interval: number } };
export type KeyMeta = Record<string, unknown>;

/** The optional settings of a create (absent: none, and enabled). */
export type KeySettings = {
  meta?: KeyMeta;
  enabled?: boolean;
  ratelimit?: RateLimitSetting;
  credits?: CreditsSetting;
  permissions?: string[];
  allowedIps?: string[];
};

export const META_MAX_BYTES = 2048;

/** Credits as stored: set at `now`, which starts the refill clock. */
export function storedCredits(credits: CreditsSetting, now: number): StoredCredits {
  return {
    remaining: credits.remaining,
    refillAmount: credits.refill?.amount ?? null,
    refillIntervalMs: credits.refill === undefined ? null : credits.refill.interval * 1000,
    refilledAt: now,
  };
}

/** Credits as key info shows them: the remaining count at `now` (a due refill applied), and the refill. */
export function creditsView(credits: StoredCredits, now: number): CreditsSetting {
  const { remaining, refillAmount, refillIntervalMs } = effectiveCredits(credits, now);
  return refillAmount === null || refillIntervalMs === null
    ? { remaining }
    : { remaining, refill: { amount: refillAmount, interval: refillIntervalMs / 1000 } };
}

export function rateLimitOf(row: ApiKeyRow): RateLimitSetting | undefined {
  return row.ratelimitLimit == null || row.ratelimitDuration == null
    ? undefined
    : { limit: row.ratelimitLimit, duration: row.ratelimitDuration };
}

export function metaOf(row: ApiKeyRow): KeyMeta | undefined {
  return row.meta == null ? undefined : (JSON.parse(row.meta) as KeyMeta);
}

/**
 * A key with its own rate limit, credits or allowed addresses (the operator's RATE_LIMIT does not
 * count): it may act on no key but itself.
 */
export function isConstrained(row: ApiKeyRow): boolean {
  return rateLimitOf(row) !== undefined || row.credits != null || row.allowedIps != null;
}

/** The stored JSON text of a list setting (permissions, allowedIps): null for none. */
export function storedList(list: readonly string[] | null | undefined): string | null {
  return list == null ? null : JSON.stringify(list);
}

/**
 * `make`, kept per row: a cached row keeps what is parsed or built from it, so a key costs one
 * JSON.parse (or one principal) per cache fill, not per verification. The rows are never changed once
 * read (an update reads a new one), but for `lastUsedAt`, which a refresh of an unchanged key brings up
 * to date (key-cache.ts) and nothing made here reads. Kept on the row itself (core/object-slots.ts).
 */
export function perRow<T>(make: (row: ApiKeyRow) => T): (row: ApiKeyRow) => T {
  const made = objectSlot<ApiKeyRow, T>();
  return (row) => {
    let value = made.get(row);
    if (value === undefined) {
      value = make(row);
      made.set(row, value);
    }
    return value;
  };
}

/** A stored permissions list, parsed, and compiled for checks when first asked. */
class PermissionList {
  readonly list: readonly string[];
  #held: HeldPermissions | undefined;
  constructor(text: string) {
    this.list = Object.freeze(JSON.parse(text) as string[]);
  }
  get held(): HeldPermissions {
    this.#held ??= heldPermissions(this.list);
    return this.#held;
  }
}

/** Distinct permissions texts kept parsed; the oldest is dropped first. */
const PERMISSION_LISTS_KEPT = 1000;
const permissionLists = new Map<string, PermissionList>();

/**
 * The list stored as `text`, shared by every row that stores the same text (keys are often given the
 * same permissions): a cache fill parses each such list once, and their checks read the same sets.
 */
function permissionListOf(text: string): PermissionList {
  let list = permissionLists.get(text);
  if (list === undefined) {
    list = new PermissionList(text);
    if (permissionLists.size >= PERMISSION_LISTS_KEPT) {
      permissionLists.delete(permissionLists.keys().next().value as string);
    }
    permissionLists.set(text, list);
  }
  return list;
}

const parsedPermissions = perRow((row) => permissionListOf(row.permissions as string));
const parsedAllowedIps = perRow((row) => JSON.parse(row.allowedIps as string) as readonly string[]);

/** The permissions the key holds, as given (wildcards included); undefined: none. */
export function permissionsOf(row: ApiKeyRow): readonly string[] | undefined {
  return row.permissions == null ? undefined : parsedPermissions(row).list;
}

const HOLDS_NONE = heldPermissions(undefined);

/** What the key holds, ready for checks (a key without permissions holds none). */
export function heldPermissionsOf(row: ApiKeyRow): HeldPermissions {
  return row.permissions == null ? HOLDS_NONE : parsedPermissions(row).held;
}

/** The addresses and blocks the key may be used from, as given; undefined: anywhere. */
export function allowedIpsOf(row: ApiKeyRow): readonly string[] | undefined {
  return row.allowedIps == null ? undefined : parsedAllowedIps(row);
}

const allowedAddressList = perRow((row) => addressList(parsedAllowedIps(row)));

/** The key's allowed addresses, ready for checks; undefined: anywhere. */
export function allowedAddressesOf(row: ApiKeyRow): AddressList | undefined {
  return row.allowedIps == null ? undefined : allowedAddressList(row);
}

/** The lineage a key's limits and credits are kept under: its rotation chain's first key, or itself. */
export function lineageOf(row: Pick<ApiKeyRow, 'id' | 'lineage'>): string {
  return row.lineage ?? row.id;
}
