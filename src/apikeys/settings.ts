// A key's settings beyond name, level and expiry: free-form metadata, enabled, its own rate limit,
// its credits, what it may do (permissions) and where from (allowedIps); how they are stored and how
// key info shows them. No HTTP, no SQL.
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

// A cached row keeps what is parsed from it, so a key costs one JSON.parse per cache fill, not per
// verification. The rows are never changed once read (an update reads a new one).
const permissionLists = new WeakMap<ApiKeyRow, readonly string[]>();
const helds = new WeakMap<ApiKeyRow, HeldPermissions>();
const addressTexts = new WeakMap<ApiKeyRow, readonly string[]>();
const addressLists = new WeakMap<ApiKeyRow, AddressList>();

/** The permissions the key holds, as given (wildcards included); undefined: none. */
export function permissionsOf(row: ApiKeyRow): readonly string[] | undefined {
  if (row.permissions == null) return undefined;
  let list = permissionLists.get(row);
  if (list === undefined) {
    list = JSON.parse(row.permissions) as string[];
    permissionLists.set(row, list);
  }
  return list;
}

/** What the key holds, ready for checks (a key without permissions holds none). */
export function heldPermissionsOf(row: ApiKeyRow): HeldPermissions {
  let held = helds.get(row);
  if (held === undefined) {
    held = heldPermissions(permissionsOf(row));
    helds.set(row, held);
  }
  return held;
}

/** The addresses and blocks the key may be used from, as given; undefined: anywhere. */
export function allowedIpsOf(row: ApiKeyRow): readonly string[] | undefined {
  if (row.allowedIps == null) return undefined;
  let list = addressTexts.get(row);
  if (list === undefined) {
    list = JSON.parse(row.allowedIps) as string[];
    addressTexts.set(row, list);
  }
  return list;
}

/** The key's allowed addresses, ready for checks; undefined: anywhere. */
export function allowedAddressesOf(row: ApiKeyRow): AddressList | undefined {
  if (row.allowedIps == null) return undefined;
  let list = addressLists.get(row);
  if (list === undefined) {
    list = addressList(allowedIpsOf(row) as readonly string[]);
    addressLists.set(row, list);
  }
  return list;
}

/** The lineage a key's limits and credits are kept under: its rotation chain's first key, or itself. */
export function lineageOf(row: Pick<ApiKeyRow, 'id' | 'lineage'>): string {
  return row.lineage ?? row.id;
}
