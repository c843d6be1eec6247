// `keygate serve`: listen, purge on a timer, and on stop finish what is in flight before closing.
import { systemClock } from './clock';
import type { Config } from './config';
import { startPurgeTimer } from './jobs/purge';
import { createKeygate } from './keygate';
import type { Logger } from './log';

/** Idle keep-alive and slow connections are closed after this many seconds without a byte. */
export const IDLE_TIMEOUT_SECONDS = 10;
// Bun would answer a declared length above its limit with its own empty, non-JSON 413 before keygate
// sees the request. keygate's JSON 413 (with Connection: close, so the rest is never read) starts at
// 16 KiB and its reader stops there for chunked bodies too, so Bun's limit is set out of the way.
const TRANSPORT_BODY_LIMIT = Number.MAX_SAFE_INTEGER;

export type RunningServer = { url: URL; stop(): Promise<void> };

/** Opens (and migrates) the database first, then listens: no request meets an unmigrated schema. */
export async function serve(
  config: Config,
  { jwtSecret, logger }: { jwtSecret: string | undefined; logger: Logger },
): Promise<RunningServer> {
  const keygate = await createKeygate(config, { jwtSecret, logger });
  let server: ReturnType<typeof Bun.serve>;
  try {
    server = listen(config, keygate.handle);
  } catch (error) {
    await keygate.close();
    throw error;
  }
  const purge = startPurgeTimer({
    store: keygate.store,
    clock: systemClock,
    intervalSeconds: config.purgeIntervalSeconds,
    logger,
  });
  const url = new URL(config.basePath || '/', server.url);
  logger.info('listening', { url: url.href, database: keygate.database });
  return {
    url,
    async stop() {
      // Stop accepting; requests in flight finish (and their writes commit) before the database closes.
      await server.stop();
      await purge.stop();
      await keygate.close();
      logger.info('stopped');
      logger.flush();
    },
  };
}

function listen(config: Config, fetch: (request: Request) => Promise<Response>) {
  return Bun.serve({
    hostname: config.host,
    port: config.port,
    fetch,
    maxRequestBodySize: TRANSPORT_BODY_LIMIT,
    idleTimeout: IDLE_TIMEOUT_SECONDS,
    development: false,
    reusePort: false, // Bun 1.4 sets SO_REUSEPORT here otherwise; a busy port must fail to start
  });
}
