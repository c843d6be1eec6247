// Seeds API keys straight into SQLite through keygate's own schema, migrations and secret hashing,
// in big transactions: a million keys in seconds, before keygate starts on the file.
import { getTableColumns, getTableName } from 'drizzle-orm';
import { generateKeyId, generateSecret, hashSecret } from '../src/apikeys/secrets';
import { openDatabase } from '../src/db/sqlite/open';
import { type ApiKeyRow, apiKeys, keyCredits } from '../src/db/sqlite/schema';

const ROWS_PER_TRANSACTION = 50_000;

export type SeedSpec = {
  count: number;
  /** Owner of the i-th key (0-based). */
  userOf: (i: number) => number;
  level: number;
  expiresAt: number;
  name: string;
  /** Each key's own rate limit (`limit` verifications per `duration` seconds); none when absent. */
  ratelimit?: { limit: number; duration: number };
  /** Each key's credits (a key_credits row, no refill); none when absent. */
  credits?: number;
  /** Each key's permissions; none when absent. */
  permissions?: readonly string[];
  /** When the i-th key was created (ms); default: the moment the seed started, for every key. */
  createdAt?: (i: number) => number;
  /** Called with each key id and its secret, in order (the caller keeps only what it needs). */
  onKey?: (id: string, secret: string, i: number) => void;
};

/**
 * The 10,000 keys the bench's tools verify: owned round-robin by 1,000 users, level 8, a day to live;
 * `settings` add their own (a rate limit, permissions) and `onKey`.
 */
export function verifyKeySpec(settings: Partial<SeedSpec> = {}): SeedSpec {
  return {
    count: 10_000,
    userOf: (i) => (i % 1000) + 1,
    level: 8,
    expiresAt: Date.now() + 86_400_000,
    name: 'bench verify',
    ...settings,
  };
}

/** Creates (or opens) the database at `path`, migrates it, and inserts every spec's keys. */
export function seedKeys(path: string, specs: SeedSpec[]): void {
  const db = openDatabase(path);
  // Only this seeding connection skips the fsyncs; keygate reopens the file with synchronous=FULL.
  // The big page cache keeps the random-order primary-key inserts in memory.
  db.$client.run('PRAGMA synchronous = OFF');
  db.$client.run('PRAGMA cache_size = -524288');
  // The statement comes from the drizzle schema; bun:sqlite runs it, so it can be finalized below.
  const columns = Object.entries(getTableColumns(apiKeys));
  const insert = db.$client.prepare(
    `INSERT INTO "${getTableName(apiKeys)}" (${columns.map(([, column]) => `"${column.name}"`).join(', ')}) ` +
      `VALUES (${columns.map(() => '?').join(', ')})`,
  );
  const order = columns.map(([property]) => property as keyof ApiKeyRow);
  const insertCredits = db.$client.prepare(
    `INSERT INTO "${getTableName(keyCredits)}" ("${keyCredits.lineage.name}", "${keyCredits.remaining.name}", "${keyCredits.refilledAt.name}") VALUES (?, ?, ?)`,
  );
  const seededAt = Date.now();
  try {
    for (const spec of specs) {
      for (let start = 0; start < spec.count; start += ROWS_PER_TRANSACTION) {
        const end = Math.min(spec.count, start + ROWS_PER_TRANSACTION);
        db.$client.run('BEGIN');
        for (let i = start; i < end; i++) {
          const createdAt = spec.createdAt?.(i) ?? seededAt;
          const id = generateKeyId(createdAt);
          const secret = generateSecret();
          const row: ApiKeyRow = {
            id,
            secretHash: hashSecret(secret),
            userId: spec.userOf(i),
            level: spec.level,
            name: spec.name,
            createdAt,
            expiresAt: spec.expiresAt,
            lineage: null,
            rotatedAt: null,
            permissions: spec.permissions === undefined ? null : JSON.stringify(spec.permissions),
            allowedIps: null,
            enabled: true,
            meta: null,
            ratelimitLimit: spec.ratelimit?.limit ?? null,
            ratelimitDuration: spec.ratelimit?.duration ?? null,
            lastUsedAt: null,
            leakedAt: null,
            leakSource: null,
          };
          insert.run(...order.map((property) => row[property]));
          // A key that starts its own rotation chain draws on the credits row named by its own id.
          if (spec.credits !== undefined) insertCredits.run(id, spec.credits, createdAt);
          spec.onKey?.(id, secret, i);
        }
        db.$client.run('COMMIT');
      }
    }
  } finally {
    if (db.$client.inTransaction) db.$client.run('ROLLBACK');
    insert.finalize();
    insertCredits.finalize();
    // Everything into the main file, so the file can be copied without its WAL.
    db.$client.run('PRAGMA wal_checkpoint(TRUNCATE)');
    db.$client.close(true);
  }
}
