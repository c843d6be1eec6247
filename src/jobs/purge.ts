// Purge of expired keys, in small batches: each batch is one short write in the group commit, and
// requests run between batches, so none waits long behind a large purge.
import type { ApiKeyStore } from '../apikeys/store';
import type { Clock } from '../clock';
import type { Logger } from '../log';

export const PURGE_BATCH_SIZE = 500;

/** One full pass; resolves with the number of keys removed. */
export async function purgeExpiredKeys(
  store: Pick<ApiKeyStore, 'deleteExpiredBatch'>,
  clock: Clock,
  batchSize = PURGE_BATCH_SIZE,
): Promise<number> {
  let removed = 0;
  for (;;) {
    const batch = await store.deleteExpiredBatch(clock(), batchSize);
    removed += batch;
    if (batch < batchSize) return removed;
  }
}

/** Runs a pass every `intervalSeconds`; stop() waits for a running pass to finish. */
export function startPurgeTimer(options: {
  store: Pick<ApiKeyStore, 'deleteExpiredBatch'>;
  clock: Clock;
  intervalSeconds: number;
  logger: Logger;
}): { stop(): Promise<void> } {
  let running: Promise<void> | undefined;
  const timer = setInterval(() => {
    if (running) return;
    const started = performance.now();
    running = purgeExpiredKeys(options.store, options.clock)
      .then((removed) => {
        if (removed > 0) {
          options.logger.info('purge', { removed, ms: Math.round(performance.now() - started) });
        }
      })
      .catch((error: unknown) => options.logger.error('purge failed', { error: String(error) }))
      .finally(() => {
        running = undefined;
      });
  }, options.intervalSeconds * 1000);
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
