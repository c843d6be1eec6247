// Writes the usage counts every USAGE_FLUSH_SECONDS: everything counted since the previous flush in
// one write, for all keys. A flush that fails puts its counts back (they go with the next one); a
// kill -9 loses what was counted since the last flush that committed, at most one interval's worth.
// Reads of the history pass through `read`, which never overlaps a flush: the counts are then either
// in memory or in the database, never in both and never in neither.
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

export function createUsageFlusher({
  counter,
  store,
  intervalSeconds,
  timer = intervalTimer,
  logger,
}: {
  counter: Pick<UsageCounter, 'take' | 'settle' | 'takeDropped'>;
  store: Pick<UsageStore, 'writeUsage'>;
  intervalSeconds: number;
  timer?: FlushTimer;
  logger: Pick<Logger, 'warn'>;
}) {
  /** The flush under way or waiting for readers; a flush asked for meanwhile joins the next one. */
  let running: Promise<void> | undefined;
  let next: Promise<void> | undefined;
  /** While true no read begins: a flush is waiting for reads to end, or writing. */
  let flushing = false;
  let flushEnded: Promise<void> = Promise.resolve();
  let readers = 0;
  let readersEnded: (() => void) | undefined;

  async function flushOnce(): Promise<void> {
    flushing = true;
    let endFlush = () => {};
    flushEnded = new Promise((resolve) => {
      endFlush = resolve;
    });
    try {
      if (readers > 0) {
        await new Promise<void>((resolve) => {
          readersEnded = resolve;
        });
      }
      const batch = counter.take();
      try {
        // Nothing counted, nothing written: an idle keygate does not write every interval.
        if (batch.rows.length > 0 || batch.lastUsed.length > 0) await store.writeUsage(batch);
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
      flushing = false;
      endFlush();
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
