// The database: pragmas read back, migrations embedded and idempotent, the counting triggers' upgrade
// and the documented way back (docs/security.md), indexes the queries use.
import { Database } from 'bun:sqlite';
import { afterAll, describe, expect, it } from 'bun:test';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { drizzle } from 'drizzle-orm/bun-sqlite';
import { migrate as migrateFrom } from 'drizzle-orm/bun-sqlite/migrator';
import {
  appliedMigrationCount,
  BUSY_TIMEOUT_MS,
  CACHE_KIB,
  migrate,
  openDatabase,
} from '../../src/db/sqlite/open';

const DRIZZLE = join(import.meta.dir, '..', '..', 'drizzle');

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

  it('counts the keys again when the counting triggers arrive (0005), including rows nothing counted', () => {
    // A database as the version before 0005 left it: migrated up to 0004, then a key imported with
    // plain SQL, which nothing counted then.
    const path = join(mkdtempSync(join(scratch, 'db-')), 'keygate.db');
    const before = mkdtempSync(join(scratch, 'migrations-'));
    mkdirSync(join(before, 'meta'));
    const journal = JSON.parse(readFileSync(join(DRIZZLE, 'meta', '_journal.json'), 'utf8'));
    journal.entries = journal.entries.filter((entry: { idx: number }) => entry.idx <= 4);
    writeFileSync(join(before, 'meta', '_journal.json'), JSON.stringify(journal));
    for (const entry of journal.entries as Array<{ tag: string }>)
      copyFileSync(join(DRIZZLE, `${entry.tag}.sql`), join(before, `${entry.tag}.sql`));
    const old = drizzle({ client: new Database(path, { create: true }) });
    migrateFrom(old, { migrationsFolder: before });
    const insert = old.$client.prepare(
      "INSERT INTO api_keys (id, secret_hash, user_id, level, name, created_at, expires_at) VALUES (?, x'00', ?, 1, 'k', 1, 9)",
    );
    insert.run('kg_1', 5);
    insert.run('kg_2', 5);
    old.$client.run('INSERT INTO user_key_counts (user_id, keys) VALUES (5, 1)'); // one of the two counted
    old.$client.close();

    const db = openDatabase(path);
    const counts = () => db.$client.query('SELECT user_id, keys FROM user_key_counts').all();
    expect(counts()).toEqual([{ user_id: 5, keys: 2 }]);
    db.$client.run(
      `INSERT INTO api_keys (id, secret_hash, user_id, level, name, created_at, expires_at) VALUES ('kg_3', x'00', 5, 1, 'k', 1, 9)`,
    );
    expect(counts()).toEqual([{ user_id: 5, keys: 3 }]);
    db.$client.close();
  });

  it("docs/security.md's undo of migration 0005 drops the triggers, and the next start applies it again", () => {
    const doc = readFileSync(join(import.meta.dir, '..', '..', 'docs', 'security.md'), 'utf8');
    const undo = /undo the upgrade with `sqlite3` \(`([^`]+)`:/.exec(doc)?.[1]?.replace(/\s+/g, ' ');
    expect(undo).toBeDefined();
    const path = join(mkdtempSync(join(scratch, 'db-')), 'keygate.db');
    const db = openDatabase(path);
    const count = appliedMigrationCount(db);
    const insert = (id: string) =>
      db.$client.run(
        `INSERT INTO api_keys (id, secret_hash, user_id, level, name, created_at, expires_at) VALUES ('${id}', x'00', 5, 1, 'k', 1, 9)`,
      );
    const counts = () => db.$client.query('SELECT user_id, keys FROM user_key_counts').all();
    insert('kg_1');
    db.$client.run(undo as string);
    // 0006 to 0012 follow 0005: the documented undo takes all eight back.
    expect(appliedMigrationCount(db)).toBe(count - 8);
    insert('kg_2'); // no trigger counts it now (an older keygate counts in its own code)
    expect(counts()).toEqual([{ user_id: 5, keys: 1 }]);
    db.$client.close();

    const upgraded = openDatabase(path);
    expect(appliedMigrationCount(upgraded)).toBe(count);
    const again = () => upgraded.$client.query('SELECT user_id, keys FROM user_key_counts').all();
    expect(again()).toEqual([{ user_id: 5, keys: 2 }]);
    upgraded.$client.run(`DELETE FROM api_keys WHERE id = 'kg_1'`);
    expect(again()).toEqual([{ user_id: 5, keys: 1 }]);
    upgraded.$client.close();
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
    // A leaked secret's key, found by the secret's hash alone.
    expect(plan("SELECT id FROM api_keys WHERE secret_hash IN (x'00', x'01')")).toContain(
      'api_keys_secret_hash',
    );
    db.$client.close();
  });
});
