// Purge of expired keys (and of usage rows and webhook messages past their retention), in small batches: each batch is
// one short write in the group commit, and requests run between batches, so none waits long behind a
// large purge.
import { createAuditLog } from '../apikeys/audit';
import type { ApiKeyStore } from '../apikeys/store';
import type { Clock } from '../core/clock';
import type { Logger } from '../core/log';
import { DAY_MS } from '../usage/service';
import type { UsageStore } from '../usage/store';
import type { WebhookStore } from '../webhooks/store';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

// Each deleted key dirties pages of four B-trees (the table and its three indexes) that a commit must
// write and fsync, and requests in the same shared commit wait for it: small batches keep what one
// commit carries small (bench/HISTORY.md).
export const PURGE_BATCH_SIZE = 25;
// The share of wall time a pass may spend in its batches: after a batch that took t ms (its work and
// its commit, longer when requests load the database), the pass waits t × (1 − share) / share. So it
// backs off by itself under load and a pass of a million keys never holds the writer for long.
export const PURGE_TIME_SHARE = 0.2;
/** The least wait between batches, so that requests always run between two of them. */
export const PURGE_PAUSE_MS = 1;

export type PurgeOptions = {
  batchSize?: number;
  timeShare?: number;
  /** Aborted: the pass ends after the batch in hand (a pass over a million keys lasts minutes). */
  signal?: AbortSignal;
  /** Milliseconds from a monotonic clock (performance.now); tests inject one. */
  elapsed?: () => number;
  /** Waits between batches (setTimeout); tests inject one. */
  wait?: (ms: number) => Promise<void>;
};

/** One full pass, or until `signal` aborts; resolves with the number of keys removed. */
export async function purgeExpiredKeys(
  store: Pick<ApiKeyStore, 'deleteExpiredBatch'>,
  clock: Clock,
  {
    batchSize = PURGE_BATCH_SIZE,
    timeShare = PURGE_TIME_SHARE,
    signal,
    elapsed = () => performance.now(),
    wait = sleep,
  }: PurgeOptions = {},
): Promise<number> {
  let removed = 0;
  while (!signal?.aborted) {
    const started = elapsed();
    const batch = await store.deleteExpiredBatch(clock(), batchSize);
    const took = elapsed() - started;
    removed += batch;
    if (batch < batchSize) break;
    await wait(Math.max(PURGE_PAUSE_MS, (took * (1 - timeShare)) / timeShare));
  }
  return removed;
}

/**
 * Usage retention: the rows whose hour began more than `retentionDays` ago, removed by the same paced
 * batches as expired keys; resolves with how many.
 */
export function purgeOldUsage(
  store: Pick<UsageStore, 'deleteUsageBefore'>,
  clock: Clock,
  retentionDays: number,
  options: PurgeOptions = {},
): Promise<number> {
  const batches = {
    deleteExpiredBatch: (now: number, limit: number) =>
      store.deleteUsageBefore(now - retentionDays * DAY_MS, limit),
  };
  return purgeExpiredKeys(batches, clock, options);
}

/**
 * Webhook retention: settled messages (and derived events' marks) older than `retentionDays`, in the
 * same paced batches; resolves with how many rows went.
 */
export function purgeOldWebhookMessages(
  store: Pick<WebhookStore, 'deleteSettledBefore'>,
  clock: Clock,
  retentionDays: number,
  options: PurgeOptions = {},
): Promise<number> {
  const batches = {
    deleteExpiredBatch: (now: number, limit: number) =>
      store.deleteSettledBefore(now - retentionDays * DAY_MS, limit),
  };
  return purgeExpiredKeys(batches, clock, options);
}

/**
 * Runs a pass every `intervalSeconds` (expired keys, then usage rows past their retention, then idle
 * rate-limit windows);
 * stop() ends a running pass after its current batch.
 */
export function startPurgeTimer(options: {
  store: Pick<ApiKeyStore, 'deleteExpiredBatch'>;
  clock: Clock;
  intervalSeconds: number;
  logger: Logger;
  usage?: { store: Pick<UsageStore, 'deleteUsageBefore'>; retentionDays: number };
  /** Settled webhook messages past their retention. */
  webhooks?: { store: Pick<WebhookStore, 'deleteSettledBefore'>; retentionDays: number };
  /** Drops the rate limiter's windows that hold nothing any more. */
  sweepRateLimits?: () => unknown;
}): { stop(): Promise<void> } {
  let running: Promise<void> | undefined;
  const stopping = new AbortController();
  const audit = createAuditLog(options.logger);
  const timer = setInterval(() => {
    if (running) return;
    const started = performance.now();
    const { usage } = options;
    running = purgeExpiredKeys(options.store, options.clock, { signal: stopping.signal })
      .then((removed) => audit.purged(removed, Math.round(performance.now() - started)))
      .then(async () => {
        if (usage === undefined) return;
        const rows = await purgeOldUsage(usage.store, options.clock, usage.retentionDays, {
          signal: stopping.signal,
        });
        if (rows > 0) options.logger.info('usage.purged', { rows, retentionDays: usage.retentionDays });
      })
      .then(async () => {
        const { webhooks } = options;
        if (webhooks === undefined) return;
        const rows = await purgeOldWebhookMessages(webhooks.store, options.clock, webhooks.retentionDays, {
          signal: stopping.signal,
        });
        if (rows > 0) options.logger.info('webhooks.purged', { rows, retentionDays: webhooks.retentionDays });
      })
      .then(async () => {
        await options.sweepRateLimits?.();
      })
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
