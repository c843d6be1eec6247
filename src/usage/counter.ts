// Usage counts in memory: per key and UTC hour, what its verifications came to, and when it was last
// used. Nothing here touches the disk: the flusher (flusher.ts) takes the counts every
// USAGE_FLUSH_SECONDS and writes them in one write. A count costs a Map lookup and an increment; a
// key's entry is allocated once per interval, an hour's bucket once per hour.
import type { Clock } from '../core/clock';

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

/** Everything counted since the previous flush: the hour rows, and each used key's latest use (ms). */
export type UsageBatch = {
  rows: UsageRow[];
  lastUsed: Array<{ keyId: string; at: number }>;
};

export type UsageRecorder = {
  record(keyId: string, outcome: UsageOutcome): void;
  /** An attempt with an id that names no key: counted nowhere, at the cost of a `record`. */
  recordUnknown(keyId: string): void;
};

export const HOUR_MS = 3_600_000;

/**
 * The most keys counted in memory at once (an entry is ~200 bytes: ~20 MB at the bound). When a new
 * key would pass it, `onFull` asks for an early flush and that key's attempt is not counted (it is
 * counted in `dropped`, which the flusher logs).
 */
export const MAX_KEYS_IN_MEMORY = 100_000;

type Bucket = Omit<UsageRow, 'keyId'>;
type Entry = { keyId: string; lastUsedAt: number | undefined; buckets: Bucket[] };

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
  /** Taken by a flush whose write has not committed yet: still the process's own, for reads. */
  let inFlight: Map<string, Entry> | undefined;
  let dropped = 0;
  let toldFull = false;
  /** Where an unknown id's attempt is counted: never taken, written or read. */
  const nowhere: Entry = { keyId: '', lastUsedAt: undefined, buckets: [] };

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
      entry = { keyId, lastUsedAt: undefined, buckets: [] };
      entries.set(keyId, entry);
    }
    return entry;
  }

  function bucketOf(entry: Entry, bucket: number): Bucket {
    const last = entry.buckets[entry.buckets.length - 1];
    if (last !== undefined && last.bucket === bucket) return last;
    // A clock set back may come to an hour already counted: look for it before adding one.
    const earlier = entry.buckets.find((candidate) => candidate.bucket === bucket);
    if (earlier !== undefined) return earlier;
    const fresh = { bucket, valid: 0, rateLimited: 0, usageExceeded: 0, denied: 0 };
    entry.buckets.push(fresh);
    return fresh;
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

  return {
    /** Counts one attempt on an existing key (never call it for an id that names no key). */
    record(keyId: string, outcome: UsageOutcome): void {
      const entry = entryOf(keyId);
      if (entry === undefined) return;
      const now = clock();
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
      // Only the current hour's bucket is kept: the entry would otherwise grow one bucket an hour.
      if (nowhere.buckets.length > 1) nowhere.buckets.shift();
      bucketOf(nowhere, now - (now % HOUR_MS)).denied++;
    },

    /**
     * Takes everything counted so far for a flush: memory starts afresh, while the taken counts stay
     * visible to `pendingRows` and `lastUsedAt` until `settle` says whether they were written.
     */
    take(): UsageBatch {
      if (inFlight !== undefined) throw new Error('a usage flush is already in flight');
      inFlight = entries;
      entries = new Map();
      toldFull = false;
      const rows: UsageRow[] = [];
      const lastUsed: UsageBatch['lastUsed'] = [];
      for (const entry of inFlight.values()) {
        for (const bucket of entry.buckets) {
          if (bucket.valid + bucket.rateLimited + bucket.usageExceeded + bucket.denied > 0) {
            rows.push({ keyId: entry.keyId, ...bucket });
          }
        }
        if (entry.lastUsedAt !== undefined) lastUsed.push({ keyId: entry.keyId, at: entry.lastUsedAt });
      }
      return { rows, lastUsed };
    },

    /** After the taken batch's write: forgotten when committed, counted again when it failed. */
    settle(written: boolean): void {
      const taken = inFlight;
      inFlight = undefined;
      if (taken === undefined || written) return;
      for (const old of taken.values()) {
        const entry = entryOf(old.keyId);
        if (entry === undefined) continue;
        for (const bucket of old.buckets) add(entry, bucket);
        if (old.lastUsedAt !== undefined) markUsed(entry, old.lastUsedAt);
      }
    },

    /** The key's hour rows not yet written (counted, or in a write not yet committed). */
    pendingRows(keyId: string): UsageRow[] {
      const rows: UsageRow[] = [];
      for (const source of [inFlight?.get(keyId), entries.get(keyId)]) {
        for (const bucket of source?.buckets ?? []) rows.push({ keyId, ...bucket });
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
