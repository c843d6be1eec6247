// The database the crash test kills keygate over, on either engine: a SQLite file in a temporary
// directory, or a throwaway PostgreSQL server (Debian's, as the tests start it). Between cycles the
// test reads a snapshot of what is stored, on a connection of its own, and judges it against what
// keygate acknowledged.
import { Database } from 'bun:sqlite';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { SQL } from 'bun';
import { startPostgres } from '../../../test/support/postgres';
import { tempDir } from './server';

/** One stored key as the checks need it: times in ms, the secret's hash as hex. */
export type StoredKey = {
  hash: string;
  userId: number;
  level: number;
  name: string;
  expiresAt: number;
  ratelimitLimit: number | null;
};

export type Snapshot = {
  /** PRAGMA integrity_check's lines on SQLite; PostgreSQL has no such check (undefined). */
  integrity: string[] | undefined;
  keys: Map<string, StoredKey>;
  /** remaining per lineage. */
  credits: Map<string, number>;
};

export type CrashDatabase = {
  engine: 'sqlite' | 'postgres';
  /** keygate's DATABASE_URL. */
  url: string;
  snapshot(): Promise<Snapshot>;
  /** Stops what it started and removes its files. */
  destroy(): Promise<void>;
};

type Row = StoredKey & { id: string };

const KEYS_QUERY = `SELECT id, user_id AS "userId", level, name, expires_at AS "expiresAt",
  ratelimit_limit AS "ratelimitLimit", %HASH% AS hash FROM api_keys`;
const CREDITS_QUERY = 'SELECT lineage, remaining FROM key_credits';

function snapshotOf(
  integrity: string[] | undefined,
  rows: Row[],
  credits: Array<{ lineage: string; remaining: number | string }>,
): Snapshot {
  const keys = new Map<string, StoredKey>();
  for (const { id, ...row } of rows) {
    keys.set(id, {
      ...row,
      userId: Number(row.userId),
      expiresAt: Number(row.expiresAt),
      ratelimitLimit: row.ratelimitLimit === null ? null : Number(row.ratelimitLimit),
    });
  }
  return {
    integrity,
    keys,
    credits: new Map(credits.map(({ lineage, remaining }) => [lineage, Number(remaining)])),
  };
}

export async function crashDatabase(engine: 'sqlite' | 'postgres'): Promise<CrashDatabase> {
  if (engine === 'sqlite') {
    const dir = tempDir('crash');
    const url = join(dir, 'keygate.db');
    return {
      engine,
      url,
      async snapshot() {
        const db = new Database(url, { readonly: true });
        try {
          const integrity = (
            db.query('PRAGMA integrity_check').all() as Array<{ integrity_check: string }>
          ).map((row) => row.integrity_check);
          const rows = db.query(KEYS_QUERY.replace('%HASH%', 'lower(hex(secret_hash))')).all() as Row[];
          const credits = db.query(CREDITS_QUERY).all() as Array<{ lineage: string; remaining: number }>;
          return snapshotOf(integrity, rows, credits);
        } finally {
          db.close();
        }
      },
      async destroy() {
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const server = await startPostgres();
  const sql = new SQL(server.url, { max: 1 });
  return {
    engine,
    url: server.url,
    async snapshot() {
      // One transaction, so the keys and the credits are read at the same moment.
      return sql.begin(async (tx) => {
        const rows = (await tx.unsafe(KEYS_QUERY.replace('%HASH%', 'secret_hash'))) as Row[];
        const credits = await tx.unsafe(CREDITS_QUERY);
        return snapshotOf(undefined, rows, credits);
      });
    },
    async destroy() {
      await sql.close();
      server.destroy();
    },
  };
}
