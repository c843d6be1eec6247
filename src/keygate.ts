// Builds one keygate from a Config: database, store, service, JWT authority and HTTP handler.
// The server, the CLI and the tests all assemble it here, so they run the same parts.
import { createKeyCache } from './apikeys/key-cache';
import { createApiKeyService } from './apikeys/service';
import { createApp } from './app';
import { FORWARD_AUTH_PATH } from './auth/forward-auth';
import { createJwtAuthority } from './auth/jwt';
import { createVerifier } from './auth/verification';
import { type Clock, systemClock } from './clock';
import type { Config } from './config';
import { openDatabase } from './db/open';
import { createSqliteApiKeyStore } from './db/sqlite-store';
import { withHttpEdge } from './http/edge';
import type { Logger } from './log';

export type Keygate = ReturnType<typeof createKeygate>;

export function createKeygate(
  config: Config,
  { jwtSecret, logger, clock = systemClock }: { jwtSecret: string; logger: Logger; clock?: Clock },
) {
  const db = openDatabase(config.databaseUrl);
  const store = createSqliteApiKeyStore(db);
  const keys = createKeyCache({ store, clock, ttlSeconds: config.keyCacheSeconds });
  const service = createApiKeyService({ store, keys, clock, maxKeysPerUser: config.maxKeysPerUser });
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
    verifier: createVerifier({ jwt, service }),
    logger,
    basePath: config.basePath,
    maxExpiresInSeconds: config.maxExpiresInSeconds,
  });
  const handle = withHttpEdge((request) => app.handle(request), logger, {
    bodyIgnoredUnder: [`${config.basePath}${FORWARD_AUTH_PATH}`],
  });
  return {
    db,
    store,
    keys,
    service,
    jwt,
    handle,
    /** Waits for queued writes, then closes the database. */
    async close() {
      await store.drained();
      db.$client.close();
    },
  };
}
