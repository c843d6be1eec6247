// Builds one keygate from a Config: database, store, service, JWT authority and HTTP handler.
// The server, the CLI and the tests all assemble it here, so they run the same parts. This is the one
// place that picks the store for the engine DATABASE_URL names (config.ts parses it); nothing below
// the store knows which runs.
import type { Database } from 'bun:sqlite';
import type { SQL } from 'bun';
import type { LookupStore } from './admin/lookup-store';
import { createKeyCache } from './apikeys/key-cache';
import { createApiKeyService } from './apikeys/service';
import type { ApiKeyStore } from './apikeys/store';
import { createApp } from './app';
import { createJwtAuthority, type JwtKeySource } from './auth/jwt';
import type { AsymmetricAlgorithm } from './auth/jwt-keys';
import { cachedSubjects, type SubjectStore, type UserIdMode } from './auth/subjects';
import { createTokenUsers } from './auth/token-users';
import { type Config, type ForwardAuthRule, readRouteRules, sqliteFile } from './config';
import { type Clock, systemClock } from './core/clock';
import type { Logger } from './core/log';
import { createPostgresLookupStore } from './db/postgres/lookups';
import { appliedPostgresMigrationCount, openPostgres } from './db/postgres/open';
import { createPostgresPolicyStore } from './db/postgres/policies';
import { createPostgresRateLimiter } from './db/postgres/rate-limits';
import { createPostgresSessionStore } from './db/postgres/sessions';
import { createPostgresApiKeyStore } from './db/postgres/store';
import { createPostgresSubjectStore } from './db/postgres/subjects';
import { createPostgresUsageStore } from './db/postgres/usage-store';
import { createPostgresWebhookStore } from './db/postgres/webhooks';
import { type CommitBatch, GroupCommitWriter } from './db/sqlite/group-commit';
import { createSqliteLookupStore } from './db/sqlite/lookups';
import { appliedMigrationCount, openDatabase } from './db/sqlite/open';
import { createSqlitePolicyStore } from './db/sqlite/policies';
import { createSqliteSessionStore } from './db/sqlite/sessions';
import { createSqliteApiKeyStore } from './db/sqlite/store';
import { createSqliteSubjectStore } from './db/sqlite/subjects';
import { createSqliteUsageStore } from './db/sqlite/usage-store';
import { createSqliteWebhookStore } from './db/sqlite/webhooks';
import { withHttpEdge } from './http/edge';
import { leakAuditLine } from './leaks/audit';
import { createGithubKeySet } from './leaks/github-keys';
import { MemoryRateLimiter } from './limits/memory-rate-limiter';
import { PendingAdmissions } from './limits/pending-admissions';
import { counterOf } from './limits/rate-limit';
import { clientAddressOf } from './network/client-address';
import { createPolicyCache } from './policies/cache';
import { createPolicyService } from './policies/service';
import type { PolicyStore } from './policies/store';
import { createSessionService } from './sessions/service';
import type { SessionStore } from './sessions/store';
import { createUsageCounter } from './usage/counter';
import { createUsageFlusher, type FlushTimer, intervalTimer } from './usage/flusher';
import { createUsageService } from './usage/service';
import type { UsageStore } from './usage/store';
import { answeredCode, createVerifier } from './verification/verdict';
import { VERSION } from './version';
import { createDerivedEvents } from './webhooks/derived';
import type { Resolver } from './webhooks/destination';
import { createOutbox } from './webhooks/outbox';
import { createSender } from './webhooks/sender';
import { createWebhookService } from './webhooks/service';
import type { WebhookStore } from './webhooks/store';

export type Engine = 'sqlite' | 'postgres';

export type OpenedStore = {
  engine: Engine;
  store: ApiKeyStore;
  /** Mapped user ids, and the user-id mode the database was started in. */
  subjects: SubjectStore;
  /** The usage rows and last use, on the same database (on SQLite, through the same writer). */
  usage: UsageStore;
  /** The operator's user policies (on SQLite, through the same writer). */
  policies: PolicyStore;
  /** The operator's queries across every user. */
  lookups: LookupStore;
  /** The console's one-time codes and sessions (on SQLite, through the same writer). */
  sessions: SessionStore;
  /** Webhook endpoints and the outbox's messages (on SQLite, through the same writer). */
  webhooks: WebhookStore;
  /** The SQLite file's absolute path (or `:memory:`), or the PostgreSQL URL without its password. */
  database: string;
  /** How many migrations the database has applied. */
  appliedMigrations(): Promise<number>;
  /** The engine's own client, for what must reach past the store (a backup, tests); never the rules. */
  client: { engine: 'sqlite'; sqlite: Database } | { engine: 'postgres'; sql: SQL };
};

/** Opens the database DATABASE_URL names (migrating it first) and its store. */
export async function openStore(
  config: Pick<Config, 'database' | 'databasePoolSize'>,
  {
    serving = true,
    onCommit,
    onWrite,
    logger,
    writeLockWaitMs,
  }: {
    /** SQLite: how long writes wait for another process's write lock before they answer 503. */
    writeLockWaitMs?: number;
    /**
     * A long-lived keygate (off for one-shot commands such as purge): on PostgreSQL it subscribes to
     * other replicas' changes, on SQLite its WAL checkpoints run on a thread of their own.
     */
    serving?: boolean;
    /** The group-commit observer (metrics). */
    onCommit?: (batch: CommitBatch) => void;
    /** PostgreSQL: told whether each write transaction committed or found the database unavailable (metrics). */
    onWrite?: (committed: boolean) => void;
    /** Told if the SQLite checkpoint thread fails (its checkpoints then run on the event loop). */
    logger?: Logger;
  } = {},
): Promise<OpenedStore> {
  const { database } = config;
  if (database.engine === 'postgres') {
    const db = await openPostgres(database.url, config.databasePoolSize);
    return {
      engine: 'postgres',
      store: await createPostgresApiKeyStore(db, { listen: serving, logger, onWrite, onCommit }),
      subjects: createPostgresSubjectStore(db),
      usage: createPostgresUsageStore(db, { onWrite }),
      policies: await createPostgresPolicyStore(db, { listen: serving }),
      lookups: createPostgresLookupStore(db),
      sessions: createPostgresSessionStore(db),
      webhooks: await createPostgresWebhookStore(db, { listen: serving }),
      database: database.redacted,
      appliedMigrations: () => appliedPostgresMigrationCount(db),
      client: { engine: 'postgres', sql: db.$client },
    };
  }
  const db = openDatabase(database.path);
  const backgroundCheckpoints =
    serving && sqliteFile(database) !== undefined
      ? { onFailure: (reason: string) => logger?.warn('wal checkpoints back on the event loop', { reason }) }
      : undefined;
  // One writer per connection: the key store's writes and the usage flushes share its commits.
  const groupCommit = new GroupCommitWriter(db.$client, onCommit, writeLockWaitMs);
  const store = createSqliteApiKeyStore(db, { onCommit, backgroundCheckpoints, groupCommit });
  return {
    engine: 'sqlite',
    store,
    subjects: createSqliteSubjectStore(db, store.write),
    usage: createSqliteUsageStore(db, groupCommit),
    policies: createSqlitePolicyStore(db, store.write),
    lookups: createSqliteLookupStore(db),
    sessions: createSqliteSessionStore(db, store.write),
    webhooks: createSqliteWebhookStore(db, store.write),
    database: database.path,
    appliedMigrations: async () => appliedMigrationCount(db),
    client: { engine: 'sqlite', sqlite: db.$client },
  };
}

/**
 * The purge of a one-shot command (`keygate purge`): through the key service, so that each purged
 * key's key.deleted is written in its batch's transaction, as the server's purge does.
 */
export async function purgeWithEvents(opened: OpenedStore, clock: Clock) {
  const outbox = createOutbox({ store: opened.webhooks, clock });
  await outbox.refresh();
  return createApiKeyService({
    store: opened.store,
    keys: { find: (id) => opened.store.findKey(id) },
    clock,
    maxKeysPerUser: 0,
    outbox,
  });
}

export type Keygate = Awaited<ReturnType<typeof createKeygate>>;

export async function createKeygate(
  config: Config,
  {
    jwtSecret,
    logger,
    clock = systemClock,
    advertiseKeepAlive = false,
    writeLockWaitMs,
    usageTimer = intervalTimer,
    recordUsage = true,
    webhookTimer = intervalTimer,
    webhookDelivery = {},
  }: {
    /** What runs the webhook sender's poll every second; tests drive one by hand. */
    webhookTimer?: FlushTimer;
    /** Tests: the webhook sender's HTTP client, resolver, timeout and signing clock. */
    webhookDelivery?: {
      fetch?: typeof fetch;
      resolve?: Resolver;
      timeoutMs?: number;
      signingClock?: Clock;
    };
    /** SQLite: how long writes wait for another process's write lock (default 2 s). */
    writeLockWaitMs?: number;
    /** The HS256 secret (see jwt-secret.ts); unused when tokens come from an identity provider. */
    jwtSecret?: string;
    logger: Logger;
    clock?: Clock;
    /** serve: every response that keeps its connection says IDLE_TIMEOUT_SECONDS in a Keep-Alive header. */
    advertiseKeepAlive?: boolean;
    /** What runs the usage flush every USAGE_FLUSH_SECONDS; tests drive one by hand. */
    usageTimer?: FlushTimer;
    /**
     * False records no last use and no usage history: only the bench's own build turns it off, to
     * measure what recording costs a verification. Not a setting.
     */
    recordUsage?: boolean;
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
          engine: config.database.engine,
          databaseUp: async () => (opened ? await opened.store.ping() : false),
          webhookQueue: async () =>
            opened ? await opened.webhooks.queueStats() : { depth: 0, oldestCreatedAt: undefined },
          now: clock,
        });
  opened = await openStore(config, {
    onCommit: metrics?.commitObserved,
    onWrite: metrics?.writeObserved,
    logger,
    writeLockWaitMs,
  });
  const { store } = opened;
  const recorded = await opened.subjects.recordMode(config.jwtUserIds).catch(async (error: unknown) => {
    await store.close();
    throw error;
  });
  if (recorded !== undefined) {
    await store.close();
    throw new UserIdModeMismatch(recorded, config.jwtUserIds);
  }
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
  // Rate-limit counts: in this process's memory on SQLite (one process), in the shared database on
  // PostgreSQL, so that replicas together never pass more than a limit.
  const rateLimiter =
    opened.client.engine === 'postgres'
      ? createPostgresRateLimiter(opened.client.sql, { clock: clock === systemClock ? undefined : clock })
      : new MemoryRateLimiter(clock);
  // Users' policies in memory, evicted by the policy store's change events (as keys are).
  const policyCache = createPolicyCache({
    store: opened.policies,
    clock,
    ttlSeconds: config.keyCacheSeconds,
  });
  // Webhooks: which endpoints take which events (read now, then on every change), the outbox hooks the
  // services give their writes, and the sender that delivers what they wrote.
  const outbox = createOutbox({ store: opened.webhooks, clock, logger });
  await outbox.refresh();
  const policies = createPolicyService({ store: opened.policies, cache: policyCache, clock, outbox });
  const service = createApiKeyService({
    store,
    keys,
    clock,
    maxKeysPerUser: config.maxKeysPerUser,
    policyOf: policies.policyOf,
    lastUsedAt: usage.lastUsedAt,
    secretPrefix: config.secretPrefix,
    // A replaced or removed rate limit's counts start afresh.
    onRateLimitReplaced: (lineage) =>
      rateLimiter.forget([counterOf('key', lineage), counterOf('operator', lineage)]),
    outbox,
  });
  const derivedEvents = createDerivedEvents({
    store: opened.webhooks,
    outbox,
    clock,
    leadTimesMs: config.webhookExpiringLeadMs,
    logger,
  });
  const sender = createSender({
    store: opened.webhooks,
    clock,
    allowPrivate: config.webhookAllowPrivate,
    logger,
    observer: metrics?.webhooks,
    timer: webhookTimer,
    onPoll: expiringScan(clock, derivedEvents.scanExpiring),
    ...webhookDelivery,
  });
  outbox.onCommitted(sender.wake);
  const webhooks = createWebhookService({
    store: opened.webhooks,
    clock,
    onMessagesDue: sender.wake,
    subscriptionsChanged: outbox.refresh,
  });
  const jwt = createJwtAuthority({
    ...jwtKeySource(config, jwtSecret),
    issuer: config.jwtIssuer,
    audience: config.jwtAudience,
    clockToleranceSeconds: config.jwtClockToleranceSeconds,
    clock,
  });
  // Pairs and ids never change once given: remembered in memory, each direction bounded.
  const subjects = config.jwtUserIds === 'mapped' ? cachedSubjects(opened.subjects) : undefined;
  const tokens = createTokenUsers({ jwt, mode: config.jwtUserIds, subjects });
  const sessions = createSessionService({
    store: opened.sessions,
    clock,
    defaultSessionSeconds: config.consoleSessionSeconds,
    consolePath: consolePathOf(config),
  });
  // Forward-auth's route rules: those read at start, replaced on SIGHUP by a file that reads well.
  let rules: readonly ForwardAuthRule[] = config.forwardAuthRules?.rules ?? [];
  const app = createApp({
    service,
    store,
    tokens,
    operators: { jwt, scope: config.jwtAdminScope },
    mappedSubjects: config.jwtUserIds === 'mapped' ? opened.subjects : undefined,
    policies,
    lookups: opened.lookups,
    verifier: createVerifier({
      tokens,
      service,
      ownerSubject: subjects?.subjectOf,
      usage: recordUsage ? usageCounter : undefined,
      limits: {
        limiter: rateLimiter,
        operatorRule: config.rateLimit,
        takeCredits: (pools, cost, now) => store.takeCredits(pools, cost, now),
        policyOf: policies.policyOf,
        pending: new PendingAdmissions(),
        clock,
      },
      limitsNoticed: derivedEvents,
    }),
    forwardAuth: { rules: () => rules, unmatched: config.forwardAuthDefault },
    clientAddress: (request, context) =>
      clientAddressOf(context.peer, request.headers.get('x-forwarded-for'), config.trustedProxyList),
    usage,
    usageCounter: recordUsage ? usageCounter : undefined,
    clock,
    logger,
    basePath: config.basePath,
    maxExpiresInSeconds: config.maxExpiresInSeconds,
    onVerification: (path, scheme, code) => {
      metrics?.verification(path, scheme, code);
      if (!recordUsage) return;
      const answered = answeredCode(scheme, code);
      if (answered !== undefined) usageCounter.recordVerification(answered);
    },
    keyEvents: metrics?.keyEvents,
    recordRouteTemplates: metrics !== undefined,
    leaks: {
      secretPrefix: config.secretPrefix,
      action: config.leakAction,
      // Told of every leak found, once its write committed: the audit line. (key.leaked, the webhook
      // event, is written in that write's own transaction: leaks/service.ts.)
      onLeak: leakAuditLine(logger),
      github: config.githubSecretScanning
        ? createGithubKeySet({ url: config.githubSecretScanningKeysUrl, clock })
        : undefined,
    },
    sessions,
    console: config.console
      ? {
          page: {
            title: config.consoleTitle,
            accent: config.consoleAccent,
            frameAncestors: config.consoleFrameAncestors,
          },
          publicUrl: config.publicUrl,
          userIds: config.jwtUserIds,
        }
      : undefined,
    webhooks,
    webhookAllowPrivate: config.webhookAllowPrivate,
  });
  sender.start();
  const handle = withHttpEdge(app.fetch, logger, {
    directRoute: app.directRoute,
    answerError: app.answerError,
    explainTokenRefusals: config.logLevel === 'debug',
    observe: metrics?.observeRequest,
    bodyLimit: app.bodyLimit,
    keepAlive: advertiseKeepAlive ? `timeout=${config.idleTimeoutSeconds}` : undefined,
  });
  return {
    engine: opened.engine,
    database: opened.database,
    client: opened.client,
    store,
    usageStore: opened.usage,
    usageCounter,
    usageFlusher,
    rateLimiter,
    keys,
    service,
    /** The operator's user policies; `policies.policyOf(userId)` answers at once when known. */
    policies,
    /** The console's links and sessions. */
    sessions,
    /** Webhooks: the endpoints' rules, the store, the sender and the derived events (tests drive them). */
    webhooks: { service: webhooks, store: opened.webhooks, outbox, sender, derived: derivedEvents },
    jwt,
    handle,
    metrics,
    /**
     * Reads FORWARD_AUTH_RULES_FILE again (SIGHUP): its rules replace the old ones, or, when the file
     * is bad, the old ones stay and the log says why. False without a rules file.
     */
    reloadForwardAuthRules(): boolean {
      const path = config.forwardAuthRules?.path;
      if (path === undefined) return false;
      try {
        rules = readRouteRules(path, (problem) => new Error(problem));
        logger.info('forward-auth rules reloaded', { path, rules: rules.length });
        return true;
      } catch (error) {
        logger.warn('forward-auth rules not reloaded: the old rules stay', {
          path,
          reason: (error as Error).message,
        });
        return false;
      }
    },
    /** Writes the usage counts, waits for queued writes, then closes the database. */
    async close() {
      await derivedEvents.settled();
      await sender.stop();
      await usageFlusher.stop();
      await opened.webhooks.close();
      await store.close();
    },
  };
}

/** Where console links point: PUBLIC_URL (when set, so the link is absolute) + BASE_PATH + /console. */
export function consolePathOf(config: Pick<Config, 'publicUrl' | 'basePath'>): string {
  return `${config.publicUrl ?? ''}${config.basePath}/console`;
}

/** How often the key.expiring scan runs (on the sender's poll): a lead window is entered on the minute. */
const EXPIRING_SCAN_MS = 60_000;

/** The scan, at most once per EXPIRING_SCAN_MS of `clock`. */
function expiringScan(clock: Clock, scan: () => Promise<number>): () => Promise<unknown> {
  let last: number | undefined;
  return async () => {
    const now = clock();
    if (last !== undefined && now - last < EXPIRING_SCAN_MS) return;
    last = now;
    await scan();
  };
}

/** The database holds keys whose user ids mean something else under the mode asked for. */
export class UserIdModeMismatch extends Error {
  override name = 'UserIdModeMismatch';
  constructor(recorded: UserIdMode, asked: UserIdMode) {
    super(
      `the database holds keys of JWT_USER_IDS=${recorded} user ids, so it cannot start with JWT_USER_IDS=${asked}; set JWT_USER_IDS=${recorded}, or use a database without keys`,
    );
  }
}

function jwtKeySource(config: Config, jwtSecret: string | undefined): JwtKeySource {
  const algorithms = config.jwtAlgorithms as readonly AsymmetricAlgorithm[];
  if (config.jwtKeySource === 'jwks' && config.jwtJwksUrl !== undefined) {
    return { jwks: { url: config.jwtJwksUrl }, algorithms };
  }
  if (config.jwtKeySource === 'public-key' && config.jwtPublicKey !== undefined) {
    return { publicKey: config.jwtPublicKey, algorithms };
  }
  if (jwtSecret === undefined) throw new Error('keygate needs its JWT secret (jwt-secret.ts)');
  return { secret: jwtSecret };
}
