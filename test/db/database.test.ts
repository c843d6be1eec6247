// The database: pragmas read back, migrations embedded and idempotent, indexes the queries use.
import { afterAll, describe, expect, it } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { appliedMigrationCount, BUSY_TIMEOUT_MS, CACHE_KIB, migrate, openDatabase } from '../../src/db/open';

const scratch = mkdtempSync(join(tmpdir(), 'keygate-db-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const tempDb = () => join(mkdtempSync(join(scratch, 'db-')), 'nested', 'keygate.db');

describe('openDatabase', () => {
  it('sets WAL, synchronous=FULL and the busy timeout on a file database', () => {
    const db = openDatabase(tempDb());
    const pragma = (name: string) => Object.values(db.$client.query(`PRAGMA ${name}`).get() as object)[0];
    expect(pragma('journal_mode')).toBe('wal');
    expect(pragma('synchronous')).toBe(2); // FULL
    expect(pragma('busy_timeout')).toBe(BUSY_TIMEOUT_MS);
    expect(pragma('cache_size')).toBe(-CACHE_KIB);
    db.$client.close();
  });

  it('migrates a fresh database, and migrating again changes nothing', () => {
    const path = tempDb();
    const db = openDatabase(path);
    expect(appliedMigrationCount(db)).toBeGreaterThanOrEqual(1);
    const count = appliedMigrationCount(db);
    migrate(db);
    migrate(db);
    expect(appliedMigrationCount(db)).toBe(count);
    db.$client.close();
    const reopened = openDatabase(path);
    expect(appliedMigrationCount(reopened)).toBe(count);
    reopened.$client.close();
  });

  it('creates the api_keys table with the indexes the lookups and the purge use', () => {
    const db = openDatabase(':memory:');
    const plan = (sql: string) =>
      (db.$client.query(`EXPLAIN QUERY PLAN ${sql}`).all() as Array<{ detail: string }>)
        .map((r) => r.detail)
        .join(' | ');
    expect(plan("SELECT * FROM api_keys WHERE id = 'x'")).toContain('INDEX');
    // The cap's count reads the list's index alone (a covering index: no row is fetched).
    expect(plan('SELECT count(*) FROM api_keys WHERE user_id = 1 AND expires_at > 5')).toContain(
      'COVERING INDEX api_keys_user_created',
    );
    expect(plan('SELECT id FROM api_keys WHERE expires_at <= 5 ORDER BY expires_at LIMIT 10')).toContain(
      'api_keys_expires',
    );
    db.$client.close();
  });
});
