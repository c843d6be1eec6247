// A key's usage history and last use, as its owner sees them: what the database holds (every
// replica's flushed counts) plus what this process has counted and not yet written, so an owner sees
// their own latest use at once. Knows no HTTP and no SQL.
import { HOUR_MS, type UsageCounter, type UsageRow } from './counter';
import type { UsageFlusher } from './flusher';
import type { UsageStore } from './store';

export const DAY_MS = 24 * HOUR_MS;

export type Granularity = 'hour' | 'day';

/** One bucket of the history: its start (ms, the start of a UTC hour or day) and its counts. */
export type UsageCounts = Omit<UsageRow, 'keyId'>;

export type UsageService = ReturnType<typeof createUsageService>;

export function createUsageService({
  store,
  counter,
  flusher,
}: {
  store: Pick<UsageStore, 'readUsage' | 'readUserUsage'>;
  counter: Pick<UsageCounter, 'pendingRows' | 'lastUsedAt'>;
  flusher: Pick<UsageFlusher, 'read' | 'flush'>;
}) {
  return {
    /**
     * The buckets of `granularity` that overlap [since, until], whole, ascending, only those with a
     * count. An hour belongs to the day it starts in (UTC).
     */
    history(
      keyId: string,
      { granularity, since, until }: { granularity: Granularity; since: number; until: number },
    ): Promise<UsageCounts[]> {
      const { unit, from, to } = wholeBuckets(granularity, since, until);
      return flusher.read(async () => {
        const stored = await store.readUsage(keyId, from, to);
        // Read after the database, and no flush in between (flusher.read): each count is in one of them.
        const pending = counter.pendingRows(keyId).filter((row) => row.bucket >= from && row.bucket <= to);
        return bucketed([...stored, ...pending], unit);
      });
    },

    /**
     * The buckets of every key the user holds, summed, as `history` gives one key's. This process's
     * counts are written first (one flush): memory holds them by key, not by user.
     */
    async userHistory(
      userId: number,
      { granularity, since, until }: { granularity: Granularity; since: number; until: number },
    ): Promise<UsageCounts[]> {
      const { unit, from, to } = wholeBuckets(granularity, since, until);
      await flusher.flush();
      return bucketed(await store.readUserUsage(userId, from, to), unit);
    },

    /**
     * Writes what this process has counted and not yet written (one flush), before a read that sums
     * stored rows across keys: other replicas' counts are at most USAGE_FLUSH_SECONDS behind.
     */
    flushPending(): Promise<void> {
      return flusher.flush();
    },

    /** The later of the stored last use and one counted here but not yet written; null when never used. */
    lastUsedAt(keyId: string, stored: number | null | undefined): number | null {
      const pending = counter.lastUsedAt(keyId);
      if (pending === undefined) return stored ?? null;
      return stored === null || stored === undefined || pending > stored ? pending : stored;
    },
  };
}

/** Whole buckets: from the start of the one `since` falls in to the end of the one `until` falls in. */
function wholeBuckets(granularity: Granularity, since: number, until: number) {
  const unit = granularity === 'hour' ? HOUR_MS : DAY_MS;
  return { unit, from: since - (since % unit), to: until - (until % unit) + unit - 1 };
}

/** Hour rows summed into buckets of `unit` ms, ascending, without the empty ones. */
function bucketed(rows: UsageRow[], unit: number): UsageCounts[] {
  const buckets = new Map<number, UsageCounts>();
  for (const row of rows) {
    const start = row.bucket - (row.bucket % unit);
    let bucket = buckets.get(start);
    if (bucket === undefined) {
      bucket = { bucket: start, valid: 0, rateLimited: 0, usageExceeded: 0, denied: 0 };
      buckets.set(start, bucket);
    }
    bucket.valid += row.valid;
    bucket.rateLimited += row.rateLimited;
    bucket.usageExceeded += row.usageExceeded;
    bucket.denied += row.denied;
  }
  return [...buckets.values()]
    .filter((bucket) => bucket.valid + bucket.rateLimited + bucket.usageExceeded + bucket.denied > 0)
    .sort((a, b) => a.bucket - b.bucket);
}
