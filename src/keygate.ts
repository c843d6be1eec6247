// Builds one keygate from a Config: database, store, service, JWT authority and HTTP handler.
// The server, the CLI and the tests all assemble it here, so they run the same parts.
import { createApiKeyService } from './apikeys/service';
import { createApiKeyStore } from './apikeys/store';
import { createApp } from './app';
import { createJwtAuthority } from './auth/jwt';
import { type Clock, systemClock } from './clock';
import type { Config } from './config';
import { openDatabase } from './db/open';
import { withHttpEdge } from './http/edge';
import type { Logger } from './log';
import { createMetrics } from './metrics/metrics';
import { VERSION } from './version';

export type Keygate = ReturnType<typeof createKeygate>;

export function createKeygate(
  config: Config,
  { jwtSecret, logger, clock = systemClock }: { jwtSecret: string; logger: Logger; clock?: Clock },
) {
  const db = openDatabase(config.databaseUrl);
  // Counted only when someone can read them: with METRICS_PORT unset requests pay nothing for metrics.
  const metrics =
    config.metricsPort === undefined
      ? undefined
      : createMetrics({ version: VERSION, engine: 'sqlite', databaseUp: () => store.ping() });
  const store = createApiKeyStore(db, { onCommit: metrics?.commitObserved });
  const service = createApiKeyService({ store, clock, maxKeysPerUser: config.maxKeysPerUser });
  const jwt = createJwtAuthority({
    secret: jwtSecret,
    issuer: config.jwtIssuer,
    audience: config.jwtAudience,
    clock,
  });
  const app = createApp({
    service,
    store,
    jwt,
    logger,
    basePath: config.basePath,
    maxExpiresInSeconds: config.maxExpiresInSeconds,
  });
  const handle = withHttpEdge((request) => app.handle(request), logger, metrics?.observeRequest);
  return {
    db,
    store,
    service,
    jwt,
    handle,
    metrics,
    /** Waits for queued writes, then closes the database. */
    async close() {
      await store.drained();
      db.$client.close();
    },
  };
}
