// Builds one keygate from a Config: database, store, service, JWT authority and HTTP handler.
// The server, the CLI and the tests all assemble it here, so they run the same parts. This is the one
// place that reads DATABASE_URL and picks the engine; nothing below the store knows which runs.
import type { Database } from 'bun:sqlite';
import { createKeyCache } from './apikeys/key-cache';
import { createApiKeyService } from './apikeys/service';
import type { ApiKeyStore } from './apikeys/store';
import { createApp } from './app';
import { createJwtAuthority, type JwtKeySource } from './auth/jwt';
import type { AsymmetricAlgorithm } from './auth/jwt-keys';
import type { Config } from './config';
import { type Clock, systemClock } from './core/clock';
import type { Logger } from './core/log';
import { appliedPostgresMigrationCount, isPostgresUrl, openPostgres, redactedUrl } from './db/postgres/open';
import { createPostgresApiKeyStore } from './db/postgres/store';
import { createPostgresUsageStore } from './db/postgres/usage-store';
import { type CommitBatch, GroupCommitWriter } from './db/sqlite/group-commit';
import { appliedMigrationCount, openDatabase } from './db/sqlite/open';
import { createSqliteApiKeyStore } from './db/sqlite/store';
import { createSqliteUsageStore } from './db/sqlite/usage-store';
import { withHttpEdge } from './http/edge';
import { createUsageCounter } from './usage/counter';
import { createUsageFlusher, type FlushTimer, intervalTimer } from './usage/flusher';
import { createUsageService } from './usage/service';
import type { UsageStore } from './usage/store';
import { createVerifier } from './verification/verdict';
import { VERSION } from './version';

export type Engine = 'sqlite' | 'postgres';

export type OpenedStore = {
  engine: Engine;
  store: ApiKeyStore;
  /** The usage rows and last use, on the same database (on SQLite, through the same writer). */
  usage: UsageStore;
  /** DATABASE_URL without a password, for log lines. */
  database: string;
  /** How many migrations the database has applied. */
  appliedMigrations(): Promise<number>;
  /**
   * Runs raw SQL with `$1`-style parameters on the engine underneath: for tests and benchmarks that
   * must reach past the store (seeding, inspecting); never used by the service.
   */
  rawQuery(query: string, params?: unknown[]): Promise<Record<string, unknown>[]>;
  /** The bun:sqlite handle on SQLite (fault tests hold its locks), undefined on PostgreSQL. */
  sqlite: Database | undefined;
};

/** Opens the database DATABASE_URL names (migrating it first) and its store. */
export async function openStore(
  config: Pick<Config, 'databaseUrl' | 'databasePoolSize'>,
  {
    serving = true,
    onCommit,
    onWrite,
    logger,
  }: {
    /**
     * A long-lived keygate (off for one-shot commands such as purge): on PostgreSQL it subscribes to
     * other replicas' changes, on SQLite its WAL checkpoints run on a thread of their own.
     */
    serving?: boolean;
    /** SQLite: the group-commit observer (metrics). */
    onCommit?: (batch: CommitBatch) => void;
    /** PostgreSQL: told whether each write transaction committed or found the database unavailable (metrics). */
    onWrite?: (committed: boolean) => void;
    /** Told if the SQLite checkpoint thread fails (its checkpoints then run on the event loop). */
    logger?: Logger;
  } = {},
): Promise<OpenedStore> {
  if (isPostgresUrl(config.databaseUrl)) {
    const db = await openPostgres(config.databaseUrl, config.databasePoolSize);
    return {
      engine: 'postgres',
      store: await createPostgresApiKeyStore(db, { listen: serving, logger, onWrite }),
      usage: createPostgresUsageStore(db, { onWrite }),
      database: redactedUrl(config.databaseUrl),
      appliedMigrations: () => appliedPostgresMigrationCount(db),
      rawQuery: (query, params = []) => db.$client.unsafe(query, params as never[]),
      sqlite: undefined,
    };
  }
  const db = openDatabase(config.databaseUrl);
  const backgroundCheckpoints =
    serving && config.databaseUrl !== ':memory:'
      ? { onFailure: (reason: string) => logger?.warn('wal checkpoints back on the event loop', { reason }) }
      : undefined;
  // One writer per connection: the key store's writes and the usage flushes share its commits.
  const groupCommit = new GroupCommitWriter(db.$client, onCommit);
  return {
    engine: 'sqlite',
    store: createSqliteApiKeyStore(db, { onCommit, backgroundCheckpoints, groupCommit }),
    usage: createSqliteUsageStore(db, groupCommit),
    database: config.databaseUrl,
    appliedMigrations: async () => appliedMigrationCount(db),
    // bun:sqlite numbers its parameters ?1, ?2…
    rawQuery: async (query, params = []) =>
      db.$client.query(query.replace(/\$(\d+)/g, '?$1')).all(...(params as never[])) as Record<
        string,
        unknown
      >[],
    sqlite: db.$client,
  };
}

export type Keygate = Awaited<ReturnType<typeof createKeygate>>;

export async function createKeygate(
  config: Config,
  {
    jwtSecret,
    logger,
    clock = systemClock,
    advertiseKeepAlive = false,
    usageTimer = intervalTimer,
  }: {
    /** The HS256 secret (see auth/jwt-secret.ts); unused when tokens come from an identity provider. */
    jwtSecret?: string;
    logger: Logger;
    clock?: Clock;
    /** serve: every response that keeps its connection says IDLE_TIMEOUT_SECONDS in a Keep-Alive header. */
    advertiseKeepAlive?: boolean;
    /** What runs the usage flush every USAGE_FLUSH_SECONDS; tests drive one by hand. */
    usageTimer?: FlushTimer;
  },
) {
  // Counted only when someone can read them: with METRICS_PORT unset nothing is counted (no route
  // carries the hook that records its route template), and prom-client is not even loaded
  // (importing it doubled the time to the first /health).
  let opened: OpenedStore | undefined;
  const metrics =
    config.metricsPort === undefined
      ? undefined
      : (await import('./metrics/metrics')).createMetrics({
          version: VERSION,
          engine: isPostgresUrl(config.databaseUrl) ? 'postgres' : 'sqlite',
          databaseUp: async () => (opened ? await opened.store.ping() : false),
        });
  opened = await openStore(config, {
    onCommit: metrics?.commitObserved,
    onWrite: metrics?.writeObserved,
    logger,
  });
  const { store } = opened;
  const keys = createKeyCache({
    store,
    clock,
    ttlSeconds: config.keyCacheSeconds,
    onLookup: metrics && ((hit) => metrics.cacheLookup('key', hit)),
  });
  // Usage counts in memory, written every USAGE_FLUSH_SECONDS; when too many keys are counted at once
  // the counter asks for a flush early.
  // (onFull runs only once the flusher below exists.)
  const usageCounter = createUsageCounter({ clock, onFull: () => void usageFlusher.flush() });
  const usageFlusher = createUsageFlusher({
    counter: usageCounter,
    store: opened.usage,
    intervalSeconds: config.usageFlushSeconds,
    timer: usageTimer,
    logger,
  });
  const usage = createUsageService({ store: opened.usage, counter: usageCounter, flusher: usageFlusher });
  const service = createApiKeyService({
    store,
    keys,
    clock,
    maxKeysPerUser: config.maxKeysPerUser,
    lastUsedAt: usage.lastUsedAt,
  });
  const jwt = createJwtAuthority({
    ...jwtKeySource(config, jwtSecret),
    issuer: config.jwtIssuer,
    audience: config.jwtAudience,
    clockToleranceSeconds: config.jwtClockToleranceSeconds,
    clock,
  });
  const app = createApp({
    service,
    store,
    jwt,
    verifier: createVerifier({ jwt, service, usage: usageCounter }),
    usage,
    usageCounter,
    clock,
    logger,
    basePath: config.basePath,
    maxExpiresInSeconds: config.maxExpiresInSeconds,
    onVerification: metrics?.verification,
    keyEvents: metrics?.keyEvents,
    recordRouteTemplates: metrics !== undefined,
  });
  const handle = withHttpEdge(app.fetch, logger, {
    directRoute: app.directRoute,
    answerError: app.answerError,
    explainTokenRefusals: config.logLevel === 'debug',
    observe: metrics?.observeRequest,
    keepAlive: advertiseKeepAlive ? `timeout=${config.idleTimeoutSeconds}` : undefined,
  });
  return {
    engine: opened.engine,
    database: opened.database,
    rawQuery: opened.rawQuery,
    sqlite: opened.sqlite,
    store,
    usageStore: opened.usage,
    usageCounter,
    usageFlusher,
    keys,
    service,
    jwt,
    handle,
    metrics,
    /** Writes the usage counts, waits for queued writes, then closes the database. */
    async close() {
      await usageFlusher.stop();
      await store.close();
    },
  };
}

function jwtKeySource(config: Config, jwtSecret: string | undefined): JwtKeySource {
  const algorithms = config.jwtAlgorithms as readonly AsymmetricAlgorithm[];
  if (config.jwtKeySource === 'jwks' && config.jwtJwksUrl !== undefined) {
    return { jwks: { url: config.jwtJwksUrl }, algorithms };
  }
  if (config.jwtKeySource === 'public-key' && config.jwtPublicKey !== undefined) {
    return { publicKey: config.jwtPublicKey, algorithms };
  }
  if (jwtSecret === undefined) throw new Error('keygate needs its JWT secret (auth/jwt-secret.ts)');
  return { secret: jwtSecret };
}
