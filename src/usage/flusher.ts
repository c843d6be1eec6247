// Writes the usage counts every USAGE_FLUSH_SECONDS: everything counted since the previous flush, for
// all keys (the verifications by code go with the first slice), in slices of at most `sliceKeys`
// keys, each slice one write (on SQLite one job of the group commit, so its own transaction), with the event loop free between two slices: a flush of 100k keys
// never stops requests for longer than one slice takes. A slice that fails puts its counts and those
// of the slices after it back (they go with the next flush); the slices committed before it stay
// written. A kill -9 loses what was counted since the last committed slice, at most one interval's
// worth. Reads of the history pass through `read`, which never overlaps a slice's write (reads run
// between slices): the counts are then either in memory or in the database, never in both and never
// in neither.
import type { Logger } from '../core/log';
import { MAX_KEYS_IN_MEMORY, type UsageCounter } from './counter';
import type { UsageStore } from './store';

/** Runs `tick` every `ms` until the returned function is called; tests drive one by hand. */
export type FlushTimer = (tick: () => void, ms: number) => () => void;

export const intervalTimer: FlushTimer = (tick, ms) => {
  const timer = setInterval(tick, ms);
  // The server keeps a serving process alive; this timer alone should not.
  timer.unref();
  return () => clearInterval(timer);
};

export type UsageFlusher = ReturnType<typeof createUsageFlusher>;

/**
 * Keys per slice: on SQLite a key's upserts cost about 10 µs (several times that on a loaded machine),
 * so a slice with its commit holds the event loop for a few ms, well under 20 ms
 * (scripts/experiments/flush-pauses.ts); a flush of 100k keys is 400 commits, about a second.
 */
export const USAGE_SLICE_KEYS = 250;

/** Lets the requests waiting on the event loop run between two slices. */
export const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export function createUsageFlusher({
  counter,
  store,
  intervalSeconds,
  timer = intervalTimer,
  logger,
  sliceKeys = USAGE_SLICE_KEYS,
  pause = nextTurn,
}: {
  counter: Pick<UsageCounter, 'begin' | 'nextSlice' | 'sliceWritten' | 'settle' | 'takeDropped'>;
  store: Pick<UsageStore, 'writeUsage'>;
  intervalSeconds: number;
  timer?: FlushTimer;
  logger: Pick<Logger, 'warn'>;
  /** The most keys one write carries. */
  sliceKeys?: number;
  /** Waits between two slices (the next turn of the event loop); tests inject one. */
  pause?: () => Promise<void>;
}) {
  /** The flush under way or waiting for readers; a flush asked for meanwhile joins the next one. */
  let running: Promise<void> | undefined;
  let next: Promise<void> | undefined;
  /** While true no read begins: a flush is waiting for reads to end, or writing. */
  let flushing = false;
  let flushEnded: Promise<void> = Promise.resolve();
  let readers = 0;
  let readersEnded: (() => void) | undefined;

  /** Holds reads off, and waits for those under way, until `openToReads`. */
  async function closeToReads(): Promise<void> {
    flushing = true;
    flushEnded = new Promise((resolve) => {
      endFlush = resolve;
    });
    if (readers > 0) {
      await new Promise<void>((resolve) => {
        readersEnded = resolve;
      });
    }
  }
  let endFlush = () => {};
  function openToReads(): void {
    flushing = false;
    endFlush();
  }

  async function flushOnce(): Promise<void> {
    try {
      await closeToReads();
      counter.begin();
      try {
        // Nothing counted, nothing written: an idle keygate does not write every interval.
        let batch = counter.nextSlice(sliceKeys);
        while (batch !== undefined) {
          if (batch.rows.length > 0 || batch.lastUsed.length > 0 || batch.verifications !== undefined) {
            await store.writeUsage(batch);
          }
          counter.sliceWritten();
          batch = counter.nextSlice(sliceKeys);
          if (batch !== undefined) {
            // Requests, and reads of the history, run between two slices.
            openToReads();
            await pause();
            await closeToReads();
          }
        }
        counter.settle(true);
      } catch (error) {
        counter.settle(false);
        logger.warn('usage flush failed; its counts go with the next one', {
          code: (error as { code?: unknown }).code ?? (error as Error).name,
        });
      }
      const dropped = counter.takeDropped();
      if (dropped > 0) {
        logger.warn('usage counts dropped: too many keys in one interval', {
          dropped,
          maxKeys: MAX_KEYS_IN_MEMORY,
        });
      }
    } finally {
      openToReads();
    }
  }

  function flush(): Promise<void> {
    if (next !== undefined) return next;
    if (running === undefined) {
      running = flushOnce().finally(() => {
        running = undefined;
      });
      return running;
    }
    next = running.then(() => {
      next = undefined;
      return flush();
    });
    return next;
  }

  const cancel = timer(() => void flush(), intervalSeconds * 1000);

  return {
    /** Writes what is counted now (after a flush under way, if any); never rejects. */
    flush,

    /** Runs `read` (a read of the database, then of memory) while no flush takes or writes counts. */
    async read<T>(read: () => Promise<T>): Promise<T> {
      while (flushing) await flushEnded;
      readers++;
      try {
        return await read();
      } finally {
        readers--;
        if (readers === 0 && readersEnded !== undefined) {
          readersEnded();
          readersEnded = undefined;
        }
      }
    },

    /** Stops the timer and writes what is left (a graceful stop). */
    async stop(): Promise<void> {
      cancel();
      await flush();
    },
  };
}
