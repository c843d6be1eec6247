// What keygate counts for Prometheus, and the one place labels are chosen: route templates, methods,
// statuses, schemes and outcome codes only. No key, user, token or address ever becomes a label.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { KeyEvents } from '../apikeys/audit';

export type Metrics = ReturnType<typeof createMetrics>;

/** `verify` is POST /apikeys/verify, `forward_auth` is /forward-auth. */
export type VerificationPath = 'verify' | 'forward_auth';
export type VerificationScheme = 'key' | 'jwt' | 'none';
type PurgeableStore = { deleteExpiredBatch(now: number, limit: number): Promise<number> };

// Any other method a client invents counts as "other", so a client cannot grow the label set.
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']);

// Request latency in seconds: from well under a millisecond (a cached token, a 404) to the 2 s a
// write may wait for another connection's lock before it answers 503.
const REQUEST_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
const COMMIT_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.5];
const BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

export function createMetrics(options: {
  version: string;
  /** The database engine: `sqlite` (or `postgres` once it exists). */
  engine: string;
  /** Asked at every scrape: does the database answer? */
  databaseUp: () => boolean | Promise<boolean>;
  /** Asked at every scrape: the webhook messages not yet settled, and when the oldest was written (ms). */
  webhookQueue?: () => Promise<{ depth: number; oldestCreatedAt: number | undefined }>;
  /** The clock the oldest message's age is counted on. */
  now?: () => number;
}) {
  const registry = new Registry();
  const registers = [registry];
  const requestLabels = ['method', 'route', 'status'] as const;
  const requests = new Counter({
    name: 'keygate_http_requests_total',
    help: 'HTTP requests answered, by method, route template and status.',
    labelNames: requestLabels,
    registers,
  });
  const requestSeconds = new Histogram({
    name: 'keygate_http_request_duration_seconds',
    help: 'Time from receiving a request to its response, by method, route template and status.',
    labelNames: requestLabels,
    buckets: REQUEST_BUCKETS,
    registers,
  });
  const verifications = new Counter({
    name: 'keygate_verifications_total',
    help: 'Outcomes of POST /apikeys/verify (path="verify") and /forward-auth (path="forward_auth").',
    labelNames: ['path', 'scheme', 'code'] as const,
    registers,
  });
  const keysCreated = new Counter({
    name: 'keygate_keys_created_total',
    help: 'API keys created (201 from POST /apikeys/jwt or /apikeys/key).',
    registers,
  });
  const keysDeleted = new Counter({
    name: 'keygate_keys_deleted_total',
    help: 'API keys removed: reason="revoked" by a DELETE, reason="expired" by the purge.',
    labelNames: ['reason'] as const,
    registers,
  });
  const keysRotated = new Counter({
    name: 'keygate_keys_rotated_total',
    help: 'API keys rotated (201 from POST /apikeys/:id/rotate/jwt or /rotate/key).',
    registers,
  });
  const cacheLookups = new Counter({
    name: 'keygate_cache_lookups_total',
    help: 'Lookups in keygate caches, by cache and result (hit or miss).',
    labelNames: ['cache', 'result'] as const,
    registers,
  });
  const commitBatchSize = new Histogram({
    name: 'keygate_db_commit_batch_size',
    help: 'Writes that shared one group commit (one transaction, one fsync).',
    buckets: BATCH_BUCKETS,
    registers,
  });
  const commitSeconds = new Histogram({
    name: 'keygate_db_commit_duration_seconds',
    help: 'Time one group commit held the database: its writes, COMMIT and the fsync.',
    buckets: COMMIT_BUCKETS,
    registers,
  });
  const commitFailures = new Counter({
    name: 'keygate_db_commit_failures_total',
    help: 'Group commits that did not reach the disk (every write in them failed).',
    registers,
  });
  new Gauge({
    name: 'keygate_db_up',
    help: '1 when the database answered a ping at this scrape, else 0.',
    registers,
    async collect() {
      let up = false;
      try {
        up = await options.databaseUp();
      } catch {
        up = false;
      }
      this.set(up ? 1 : 0);
    },
  });
  // Set by each write's outcome, not at scrape: whether the database answers reads (keygate_db_up,
  // /health) says nothing of a full disk or a read-only database, which refuse only writes.
  const databaseWritable = new Gauge({
    name: 'keygate_db_writable',
    help: '1 while the last write committed (or none has failed yet), 0 after a write failed because the database could not take it (unreachable, locked, full disk, read-only).',
    registers,
  });
  databaseWritable.set(1);
  const webhookMessages = new Counter({
    name: 'keygate_webhook_messages_total',
    help: 'Webhook delivery attempts by event and outcome: delivered, retry (failed, tried again later), failed (given up), dropped (its endpoint was deleted).',
    labelNames: ['event', 'outcome'] as const,
    registers,
  });
  const webhookEndpointsDisabled = new Counter({
    name: 'keygate_webhook_endpoints_disabled_total',
    help: 'Webhook endpoints disabled by keygate: reason="gone" (a 410), reason="failing" (three days of failures).',
    labelNames: ['reason'] as const,
    registers,
  });
  // Both read at scrape, in one query, from the shared outbox (every replica sees the same queue).
  let queue: Promise<{ depth: number; oldestCreatedAt: number | undefined }> | undefined;
  const queueOnce = () => {
    // Shared by the two gauges while one read is in flight; a scrape after it settled reads afresh
    // (a timer clearing it later let a scrape right after a delivery see the queue as it was).
    queue ??= (options.webhookQueue?.() ?? Promise.resolve({ depth: 0, oldestCreatedAt: undefined })).finally(
      () => {
        queue = undefined;
      },
    );
    return queue;
  };
  new Gauge({
    name: 'keygate_webhook_queue_depth',
    help: 'Webhook messages not yet delivered or given up (due now or waiting for a retry).',
    registers,
    async collect() {
      this.set((await queueOnce().catch(() => ({ depth: 0 }))).depth);
    },
  });
  new Gauge({
    name: 'keygate_webhook_oldest_message_age_seconds',
    help: 'Age of the oldest webhook message not yet delivered or given up; 0 when none.',
    registers,
    async collect() {
      const { oldestCreatedAt } = await queueOnce().catch(() => ({ oldestCreatedAt: undefined }));
      const now = (options.now ?? Date.now)();
      this.set(oldestCreatedAt === undefined ? 0 : Math.max(0, (now - oldestCreatedAt) / 1000));
    },
  });
  new Gauge({
    name: 'keygate_build_info',
    help: 'Always 1; the labels say which keygate build answers.',
    labelNames: ['version', 'engine'] as const,
    registers,
  }).set({ version: options.version, engine: options.engine }, 1);

  // Zero series for the outcomes a dashboard expects, so rate() has a line before the first event.
  keysCreated.inc(0);
  keysRotated.inc(0);
  for (const reason of ['revoked', 'expired'] as const) keysDeleted.inc({ reason }, 0);

  return {
    /** One answered request. */
    observeRequest(method: string, route: string, status: number, seconds: number): void {
      const labels = { method: METHODS.has(method) ? method : 'other', route, status: String(status) };
      requests.inc(labels);
      requestSeconds.observe(labels, seconds);
    },
    /** Told of each committed change to keys, where it happens (beside the audit line). */
    keyEvents: {
      created: () => keysCreated.inc(),
      deleted: () => keysDeleted.inc({ reason: 'revoked' }),
      rotated: () => keysRotated.inc(),
      updated: () => undefined,
      revokedAll: ({ count }) => keysDeleted.inc({ reason: 'revoked' }, count),
    } as KeyEvents,
    verification(path: VerificationPath, scheme: VerificationScheme, code: string): void {
      verifications.inc({ path, scheme, code });
    },
    /** The store as the purge sees it, counting every batch it removes as it commits. */
    countingPurges(store: PurgeableStore): PurgeableStore {
      return {
        async deleteExpiredBatch(now, limit) {
          const removed = await store.deleteExpiredBatch(now, limit);
          if (removed > 0) keysDeleted.inc({ reason: 'expired' }, removed);
          return removed;
        },
      };
    },
    /** What the webhook sender tells (webhooks/sender.ts). */
    webhooks: {
      message: (event: string, outcome: string) => webhookMessages.inc({ event, outcome }),
      endpointDisabled: (reason: 'gone' | 'failing') => webhookEndpointsDisabled.inc({ reason }),
    },
    cacheLookup(cache: string, hit: boolean): void {
      cacheLookups.inc({ cache, result: hit ? 'hit' : 'miss' });
    },
    /** The group-commit writers' observer (db/sqlite/group-commit.ts, db/postgres/group-commit.ts). */
    commitObserved(batch: { size: number; seconds: number; committed: boolean }): void {
      commitBatchSize.observe(batch.size);
      commitSeconds.observe(batch.seconds);
      if (!batch.committed) commitFailures.inc();
      databaseWritable.set(batch.committed ? 1 : 0);
    },
    /**
     * A PostgreSQL write's outcome (a key write, a usage flush): committed, or refused because the
     * database could not take it. The purge's periodic write probes it again after a failure; a
     * pass with nothing to delete commits without writing, so it reads 1 even on a full disk.
     */
    writeObserved(committed: boolean): void {
      databaseWritable.set(committed ? 1 : 0);
    },
    contentType: registry.contentType,
    /** The Prometheus text exposition of everything above. */
    exposition(): Promise<string> {
      return registry.metrics();
    },
  };
}
