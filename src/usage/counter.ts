// Usage counts in memory: per key and UTC hour, what its verifications came to, and when it was last
// used. Nothing here touches the disk: the flusher (flusher.ts) takes the counts every
// USAGE_FLUSH_SECONDS and writes them in slices of keys (`begin`, `nextSlice`, `sliceWritten`,
// `settle`), or all in one (`take`, `settle`). A count costs a lookup and an increment: a key's
// entry, allocated once per interval, holds its latest hour's counts itself (one object to reach on
// every verification), and an earlier hour's only when the hour turns within the interval; a
// verification finds it by the key's row (`recordRow`), anything else by the key's id.
// Beside the keys' counts, every verification answer's code (tokens' and unknown keys' too) is
// counted per hour for the operator's overview: one Map increment, written with the flush's first
// slice.
import type { Clock } from '../core/clock';
import { objectSlot } from '../core/object-slots';

/**
 * What one attempt on a key came to. `valid`, `rateLimited`, `usageExceeded` and `denied` are counted
 * in the key's hour (and `valid` is also its last use); `authenticated` (a /key endpoint accepted the
 * key) is a last use only: the history counts verifications, as the rate limit does.
 */
export type UsageOutcome = 'valid' | 'rateLimited' | 'usageExceeded' | 'denied' | 'authenticated';

/** The outcome a verification code counts as: VALID, RATE_LIMITED, USAGE_EXCEEDED, or a refusal. */
export function usageOutcomeOf(code: string): UsageOutcome {
  if (code === 'VALID') return 'valid';
  if (code === 'RATE_LIMITED') return 'rateLimited';
  if (code === 'USAGE_EXCEEDED') return 'usageExceeded';
  return 'denied';
}

/** The counts of one key in one UTC hour; `bucket` is the hour's start (ms). */
export type UsageRow = {
  keyId: string;
  bucket: number;
  valid: number;
  rateLimited: number;
  usageExceeded: number;
  denied: number;
};

/** How many verification answers carried `code` in the UTC hour starting at `bucket` (ms). */
export type VerificationCount = { bucket: number; code: string; count: number };

/**
 * Everything counted since the previous flush: the hour rows, and each used key's latest use (ms);
 * the verifications by hour and code, when any were counted (only in a flush's first slice).
 */
export type UsageBatch = {
  rows: UsageRow[];
  lastUsed: Array<{ keyId: string; at: number }>;
  verifications?: VerificationCount[];
};

export type UsageRecorder = {
  record(keyId: string, outcome: UsageOutcome): void;
  /**
   * `record` of the row's key, found by the row object itself after its first count in the interval;
   * `at`: when (the verification's reading of the clock).
   */
  recordRow(row: KeyRow, outcome: UsageOutcome, at: number): void;
  /** An attempt with an id that names no key: counted nowhere, at the cost of a `record`. */
  recordUnknown(keyId: string): void;
};

/** A key's row as the caller holds it (the key cache's): the same object for as long as it is cached. */
export type KeyRow = { readonly id: string };

export const HOUR_MS = 3_600_000;

/**
 * The most keys counted in memory at once (an entry is ~200 bytes: ~20 MB at the bound). When a new
 * key would pass it, `onFull` asks for an early flush and that key's attempt is not counted (it is
 * counted in `dropped`, which the flusher logs).
 */
export const MAX_KEYS_IN_MEMORY = 100_000;

type Bucket = Omit<UsageRow, 'keyId'>;
/** A key's counts since the flush: its latest hour's in the entry itself, other hours in `earlier`. */
type Entry = Bucket & {
  keyId: string;
  lastUsedAt: number | undefined;
  earlier: Bucket[] | undefined;
  /** The interval it counts for (`intervals`): an entry kept on a row from an earlier one is not used. */
  interval: number;
};

const NO_HOUR = -1;
const newEntry = (keyId: string, interval: number): Entry => ({
  keyId,
  lastUsedAt: undefined,
  bucket: NO_HOUR,
  valid: 0,
  rateLimited: 0,
  usageExceeded: 0,
  denied: 0,
  earlier: undefined,
  interval,
});

/**
 * A verification's entry, kept on the key's row (the same object for as long as the key cache holds
 * it): reached without hashing the id's text, which a verification does not otherwise touch, nor the
 * row in a WeakMap, which costs every collection a walk of its entries (core/object-slots.ts).
 */
const entryOnRow = objectSlot<KeyRow, Entry>();
/** Numbers every counter's intervals apart, so an entry is used only by its counter in its interval. */
let intervals = 0;
const counted = (bucket: Bucket) =>
  bucket.valid + bucket.rateLimited + bucket.usageExceeded + bucket.denied > 0;
const copyOf = ({ bucket, valid, rateLimited, usageExceeded, denied }: Bucket): Bucket => ({
  bucket,
  valid,
  rateLimited,
  usageExceeded,
  denied,
});

/** The entry's hours that counted anything. */
function bucketsOf(entry: Entry): Bucket[] {
  const buckets = entry.earlier === undefined ? [] : entry.earlier.filter(counted);
  if (counted(entry)) buckets.push(entry);
  return buckets;
}

export type UsageCounter = ReturnType<typeof createUsageCounter>;

export function createUsageCounter({
  clock,
  maxKeys = MAX_KEYS_IN_MEMORY,
  onFull,
}: {
  clock: Clock;
  maxKeys?: number;
  /** Told (once per interval) when the bound is reached: the flusher flushes early. */
  onFull?: () => void;
}) {
  let entries = new Map<string, Entry>();
  /** This interval's number: `entries` and those kept on rows (`recordRow`) count for it. */
  let interval = ++intervals;
  /** Taken by a flush and not committed yet: still the process's own, for reads. */
  let inFlight: Map<string, Entry> | undefined;
  /** The flush's keys not handed out in a slice yet, and the slice last handed out. */
  let handing: MapIterator<Entry> | undefined;
  let slice: Entry[] = [];
  let dropped = 0;
  let toldFull = false;
  /** Verification answers by hour and code since the flush, the current hour's Map at hand. */
  let codeHours = new Map<number, Map<string, number>>();
  let codeHour = NO_HOUR;
  let codes = new Map<string, number>();
  /** Taken by the flush begun, until the slice carrying them is written (or the flush settles). */
  let codesInFlight: Map<number, Map<string, number>> | undefined;
  let codesInSlice = false;
  /** Where an unknown id's attempt is counted: never taken, written or read. */
  const nowhere: Entry = newEntry('', 0);

  function entryOf(keyId: string): Entry | undefined {
    let entry = entries.get(keyId);
    if (entry === undefined) {
      if (entries.size >= maxKeys) {
        dropped++;
        if (!toldFull) {
          toldFull = true;
          onFull?.();
        }
        return undefined;
      }
      entry = newEntry(keyId, interval);
      entries.set(keyId, entry);
    }
    return entry;
  }

  function bucketOf(entry: Entry, bucket: number): Bucket {
    if (entry.bucket === bucket) return entry;
    // A clock set back may come to an hour already counted: look for it before starting one.
    const earlier = entry.earlier?.find((candidate) => candidate.bucket === bucket);
    if (earlier !== undefined) return earlier;
    // Another hour: the entry's counts so far move to `earlier`, and the entry counts this one.
    if (counted(entry)) {
      entry.earlier ??= [];
      entry.earlier.push(copyOf(entry));
    }
    entry.bucket = bucket;
    entry.valid = 0;
    entry.rateLimited = 0;
    entry.usageExceeded = 0;
    entry.denied = 0;
    return entry;
  }

  function add(entry: Entry, counts: Bucket): void {
    const into = bucketOf(entry, counts.bucket);
    into.valid += counts.valid;
    into.rateLimited += counts.rateLimited;
    into.usageExceeded += counts.usageExceeded;
    into.denied += counts.denied;
  }

  function markUsed(entry: Entry, at: number): void {
    if (entry.lastUsedAt === undefined || at > entry.lastUsedAt) entry.lastUsedAt = at;
  }

  /**
   * Starts a flush: memory starts afresh, while the taken counts stay visible to `pendingRows` and
   * `lastUsedAt` until their slice is written or `settle` ends the flush.
   */
  function begin(): void {
    if (inFlight !== undefined) throw new Error('a usage flush is already in flight');
    inFlight = entries;
    entries = new Map();
    interval = ++intervals;
    toldFull = false;
    handing = inFlight.values();
    slice = [];
    codesInFlight = codeHours.size === 0 ? undefined : codeHours;
    codeHours = new Map();
    codeHour = NO_HOUR;
  }

  /** The verification counts taken by the flush, for its first slice; undefined when none or handed. */
  function takenCodes(): VerificationCount[] | undefined {
    if (codesInFlight === undefined || codesInSlice) return undefined;
    const counts: VerificationCount[] = [];
    for (const [bucket, byCode] of codesInFlight) {
      for (const [code, count] of byCode) counts.push({ bucket, code, count });
    }
    codesInSlice = true;
    return counts;
  }

  function addCodes(bucket: number, byCode: Map<string, number>): void {
    let into = codeHours.get(bucket);
    if (into === undefined) {
      into = new Map();
      codeHours.set(bucket, into);
    }
    for (const [code, count] of byCode) into.set(code, (into.get(code) ?? 0) + count);
  }

  /**
   * The next slice of the flush begun: the hour rows and last uses of up to `maxKeys` keys not
   * handed out yet; undefined once every key was.
   */
  function nextSlice(maxKeys: number): UsageBatch | undefined {
    if (handing === undefined) throw new Error('no usage flush in flight');
    slice = [];
    codesInSlice = false;
    const verifications = takenCodes();
    const rows: UsageRow[] = [];
    const lastUsed: UsageBatch['lastUsed'] = [];
    while (slice.length < maxKeys) {
      const next = handing.next();
      if (next.done) break;
      const entry = next.value;
      slice.push(entry);
      for (const bucket of bucketsOf(entry)) rows.push({ keyId: entry.keyId, ...copyOf(bucket) });
      if (entry.lastUsedAt !== undefined) lastUsed.push({ keyId: entry.keyId, at: entry.lastUsedAt });
    }
    if (verifications !== undefined) return { rows, lastUsed, verifications };
    return slice.length === 0 ? undefined : { rows, lastUsed };
  }

  function count(entry: Entry, outcome: UsageOutcome, now: number): void {
    if (outcome === 'authenticated') {
      markUsed(entry, now);
      return;
    }
    const bucket = bucketOf(entry, now - (now % HOUR_MS));
    switch (outcome) {
      case 'valid':
        bucket.valid++;
        markUsed(entry, now);
        break;
      case 'rateLimited':
        bucket.rateLimited++;
        break;
      case 'usageExceeded':
        bucket.usageExceeded++;
        break;
      case 'denied':
        bucket.denied++;
        break;
    }
  }

  return {
    /** Counts one attempt on an existing key (never call it for an id that names no key). */
    record(keyId: string, outcome: UsageOutcome): void {
      const entry = entryOf(keyId);
      if (entry !== undefined) count(entry, outcome, clock());
    },

    recordRow(row: KeyRow, outcome: UsageOutcome, at: number): void {
      let entry = entryOnRow.get(row);
      if (entry === undefined || entry.interval !== interval) {
        entry = entryOf(row.id);
        if (entry === undefined) return;
        entryOnRow.set(row, entry);
      }
      count(entry, outcome, at);
    },

    /**
     * Does for an id that names no key what `record` does for a wrong secret (a lookup of the id, the
     * hour's bucket, an increment), counting into an entry nobody reads: a verify of an unknown key
     * costs what one of a known key with a wrong secret does (docs/security.md).
     */
    recordUnknown(keyId: string): void {
      // The lookup a known id's record makes, its answer kept where nothing reads it (an id counted
      // before its key was deleted is unknown now, and must not be counted again).
      nowhere.lastUsedAt = entries.get(keyId)?.lastUsedAt;
      const now = clock();
      // Only the current hour is kept: the entry would otherwise grow one bucket an hour.
      nowhere.earlier = undefined;
      bucketOf(nowhere, now - (now % HOUR_MS)).denied++;
    },

    /**
     * Counts one verification answer by its code (any credential's, an unknown key's too), in the
     * current UTC hour: a Map increment, the hour's Map kept at hand.
     */
    recordVerification(code: string): void {
      const now = clock();
      const bucket = now - (now % HOUR_MS);
      if (bucket !== codeHour) {
        let hour = codeHours.get(bucket);
        if (hour === undefined) {
          hour = new Map();
          codeHours.set(bucket, hour);
        }
        codes = hour;
        codeHour = bucket;
      }
      codes.set(code, (codes.get(code) ?? 0) + 1);
    },

    begin,
    nextSlice,

    /** The slice last handed out was committed: its counts are the database's now, no longer ours. */
    sliceWritten(): void {
      for (const entry of slice) inFlight?.delete(entry.keyId);
      slice = [];
      if (codesInSlice) codesInFlight = undefined;
      codesInSlice = false;
    },

    /** Takes everything counted so far for a flush, in one batch (`settle` ends the flush). */
    take(): UsageBatch {
      begin();
      return nextSlice(Number.POSITIVE_INFINITY) ?? { rows: [], lastUsed: [] };
    },

    /**
     * Ends the flush: when `written`, whatever it took was committed and is forgotten; when its write
     * failed, what was not committed yet (the failed slice and those after it) is counted again.
     */
    settle(written: boolean): void {
      const taken = inFlight;
      const codesTaken = codesInFlight;
      inFlight = undefined;
      handing = undefined;
      slice = [];
      codesInFlight = undefined;
      codesInSlice = false;
      if (!written && codesTaken !== undefined) {
        for (const [bucket, byCode] of codesTaken) addCodes(bucket, byCode);
      }
      if (taken === undefined || written) return;
      for (const old of taken.values()) {
        const entry = entryOf(old.keyId);
        if (entry === undefined) continue;
        for (const bucket of bucketsOf(old)) add(entry, bucket);
        if (old.lastUsedAt !== undefined) markUsed(entry, old.lastUsedAt);
      }
    },

    /** The key's hour rows not yet written (counted, or in a write not yet committed). */
    pendingRows(keyId: string): UsageRow[] {
      const rows: UsageRow[] = [];
      for (const source of [inFlight?.get(keyId), entries.get(keyId)]) {
        if (source === undefined) continue;
        for (const bucket of bucketsOf(source)) rows.push({ keyId, ...copyOf(bucket) });
      }
      return rows;
    },

    /** The key's latest use not yet written, in ms; undefined when none. */
    lastUsedAt(keyId: string): number | undefined {
      const taken = inFlight?.get(keyId)?.lastUsedAt;
      const counted = entries.get(keyId)?.lastUsedAt;
      if (taken === undefined) return counted;
      return counted === undefined || taken > counted ? taken : counted;
    },

    /** Attempts not counted because the bound was reached; reading resets it. */
    takeDropped(): number {
      const count = dropped;
      dropped = 0;
      return count;
    },

    /** How many keys are counted in memory now. */
    get size(): number {
      return entries.size;
    },
  };
}
