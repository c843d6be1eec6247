// `keygate serve`: listen, purge on a timer, and on stop finish what is in flight before closing.

import type { Config } from './config';
import { systemClock } from './core/clock';
import type { Logger } from './core/log';
import { startPurgeTimer } from './jobs/purge';
import { createKeygate } from './keygate';
import { type MetricsListener, startMetricsListener } from './metrics/listener';

// Bun would answer a declared length above its limit with its own empty, non-JSON 413 before keygate
// sees the request. keygate's JSON 413 (with Connection: close, so the rest is never read) starts at
// 16 KiB and its reader stops there for chunked bodies too, so Bun's limit is set out of the way.
const TRANSPORT_BODY_LIMIT = Number.MAX_SAFE_INTEGER;

export type RunningServer = {
  url: URL;
  metricsUrl: URL | undefined;
  /** FORWARD_AUTH_RULES_FILE read again (SIGHUP); a bad file keeps the old rules. */
  reloadForwardAuthRules(): boolean;
  stop(): Promise<void>;
};

/** Opens (and migrates) the database first, then listens: no request meets an unmigrated schema. */
export async function serve(
  config: Config,
  {
    jwtSecret,
    logger,
    recordUsage,
  }: {
    jwtSecret: string | undefined;
    logger: Logger;
    /** Off only in the bench's own build (see createKeygate). */
    recordUsage?: boolean;
  },
): Promise<RunningServer> {
  const keygate = await createKeygate(config, { jwtSecret, logger, advertiseKeepAlive: true, recordUsage });
  const { metrics } = keygate;
  let metricsListener: MetricsListener | undefined;
  let server: ReturnType<typeof Bun.serve>;
  try {
    metricsListener =
      metrics && config.metricsPort !== undefined
        ? startMetricsListener({ host: config.metricsHost, port: config.metricsPort, metrics })
        : undefined;
    server = listen(config, keygate.handle);
  } catch (error) {
    await metricsListener?.stop();
    await keygate.close();
    throw error;
  }
  const purge = startPurgeTimer({
    // Through the key service, which writes each purged key's key.deleted in the batch's transaction.
    store: metrics ? metrics.countingPurges(keygate.service) : keygate.service,
    clock: systemClock,
    intervalSeconds: config.purgeIntervalSeconds,
    logger,
    usage: { store: keygate.usageStore, retentionDays: config.usageRetentionDays },
    webhooks: { store: keygate.webhooks.store, retentionDays: config.webhookRetentionDays },
    sweepRateLimits: () => keygate.rateLimiter.sweep(),
  });
  const url = new URL(config.basePath || '/', server.url);
  logger.info('listening', {
    url: url.href,
    database: keygate.database,
    ...(metricsListener ? { metrics: metricsListener.url.href } : {}),
  });
  return {
    url,
    metricsUrl: metricsListener?.url,
    reloadForwardAuthRules: keygate.reloadForwardAuthRules,
    async stop() {
      // Stop accepting; requests in flight finish (and their writes commit) before the database closes,
      // for at most SHUTDOWN_TIMEOUT_SECONDS: then the connections still open (a body that never
      // completes, a slow client) are closed, so the process exits within a container's grace period.
      let timer: ReturnType<typeof setTimeout> | undefined;
      const drained = server.stop().then(() => true);
      const timedOut = new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), config.shutdownTimeoutSeconds * 1000);
      });
      const finished = await Promise.race([drained, timedOut]);
      clearTimeout(timer);
      if (!finished) {
        logger.warn('closing connections still open', { afterSeconds: config.shutdownTimeoutSeconds });
        await server.stop(true);
      }
      await metricsListener?.stop();
      await purge.stop();
      // Writes the usage counts not yet flushed before the database closes.
      await keygate.close();
      logger.info('stopped');
      logger.flush();
    },
  };
}

function listen(config: Config, handle: Awaited<ReturnType<typeof createKeygate>>['handle']) {
  return Bun.serve({
    hostname: config.host,
    port: config.port,
    fetch: handle,
    maxRequestBodySize: TRANSPORT_BODY_LIMIT,
    idleTimeout: config.idleTimeoutSeconds,
    development: false,
    reusePort: false, // Bun 1.4 sets SO_REUSEPORT here otherwise; a busy port must fail to start
  });
}
