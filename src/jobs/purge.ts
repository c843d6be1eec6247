// Purge of expired keys, in small batches: each batch is one short write in the group commit, and
// requests run between batches, so none waits long behind a large purge.
import { createAuditLog } from '../apikeys/audit';
import type { ApiKeyStore } from '../apikeys/store';
import type { Clock } from '../clock';
import type { Logger } from '../log';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

// Keys are random, so each deleted key dirties index pages of its own: 500 a batch held a shared
// commit (and every request in it) for ~30 ms on a million-key table; 100 takes ~3 ms, at the same
// overall rate (bench/RESULTS.md, History).
export const PURGE_BATCH_SIZE = 100;
// Between batches: without it every shared commit carried a batch, and under load requests waited
// ~10 ms each for as long as a big purge lasted; with it most commits carry none.
export const PURGE_PAUSE_MS = 5;

export type PurgeOptions = {
  batchSize?: number;
  pauseMs?: number;
  /** Aborted: the pass ends after the batch in hand (a pass over a million keys lasts a minute). */
  signal?: AbortSignal;
};

/** One full pass, or until `signal` aborts; resolves with the number of keys removed. */
export async function purgeExpiredKeys(
  store: Pick<ApiKeyStore, 'deleteExpiredBatch'>,
  clock: Clock,
  { batchSize = PURGE_BATCH_SIZE, pauseMs = PURGE_PAUSE_MS, signal }: PurgeOptions = {},
): Promise<number> {
  let removed = 0;
  while (!signal?.aborted) {
    const batch = await store.deleteExpiredBatch(clock(), batchSize);
    removed += batch;
    if (batch < batchSize) break;
    await sleep(pauseMs);
  }
  return removed;
}

/** Runs a pass every `intervalSeconds`; stop() ends a running pass after its current batch. */
export function startPurgeTimer(options: {
  store: Pick<ApiKeyStore, 'deleteExpiredBatch'>;
  clock: Clock;
  intervalSeconds: number;
  logger: Logger;
}): { stop(): Promise<void> } {
  let running: Promise<void> | undefined;
  const stopping = new AbortController();
  const audit = createAuditLog(options.logger);
  const timer = setInterval(() => {
    if (running) return;
    const started = performance.now();
    running = purgeExpiredKeys(options.store, options.clock, { signal: stopping.signal })
      .then((removed) => audit.purged(removed, Math.round(performance.now() - started)))
      .catch((error: unknown) => options.logger.error('purge failed', { error: String(error) }))
      .finally(() => {
        running = undefined;
      });
  }, options.intervalSeconds * 1000);
  return {
    async stop() {
      clearInterval(timer);
      stopping.abort();
      await running;
    },
  };
}
