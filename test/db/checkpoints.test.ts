// WAL checkpoints on their own thread: a serving keygate's commits reach the database file without
// SQLite's automatic checkpoint, which comes back whenever the thread is not running; a long WAL is
// restarted while the writes are held.

import { afterAll, describe, expect, it } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AUTOCHECKPOINT_PAGES, checkpointInBackground } from '../../src/db/sqlite/checkpoints';
import { openDatabase } from '../../src/db/sqlite/open';
import { openStore } from '../../src/keygate';
import { reachesDatabaseFile } from '../support/database-file';
import { sqliteOf } from '../support/raw-query';
import { id, row } from '../support/rows';

const scratch = mkdtempSync(join(tmpdir(), 'keygate-checkpoints-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const tempDb = () => join(mkdtempSync(join(scratch, 'db-')), 'keygate.db');

const autocheckpoint = (client: { query(sql: string): { get(): unknown } }) =>
  (client.query('PRAGMA wal_autocheckpoint').get() as { wal_autocheckpoint: number }).wal_autocheckpoint;
const noHold = () => () => {};
/** A small restart threshold, so the test writes a few hundred pages, not 64 MiB. */
const RESTART_AFTER = 256;

describe('a serving keygate on SQLite', () => {
  it('turns the automatic checkpoint off and checkpoints each commit into the file from its own thread', async () => {
    const path = tempDb();
    const opened = await openStore({ database: { engine: 'sqlite', path }, databasePoolSize: 1 });
    try {
      // One small commit: far below the 1000 pages after which SQLite itself would checkpoint.
      await opened.store.insertKeyWithinLimit(row(id(1)), 10);
      expect(await reachesDatabaseFile(path, id(1))).toBe(true);
      expect(autocheckpoint(sqliteOf(opened) as never)).toBe(0);
    } finally {
      await opened.store.close();
    }
  });

  it('leaves the automatic checkpoint on for a one-shot command', async () => {
    const path = tempDb();
    const opened = await openStore(
      { database: { engine: 'sqlite', path }, databasePoolSize: 1 },
      { serving: false },
    );
    try {
      expect(autocheckpoint(sqliteOf(opened) as never)).toBe(AUTOCHECKPOINT_PAGES);
      await opened.store.insertKeyWithinLimit(row(id(2)), 10);
      expect(readFileSync(path).includes(id(2))).toBe(false);
    } finally {
      await opened.store.close();
    }
  });
});

describe('checkpointInBackground', () => {
  it('keeps the automatic checkpoint, and says why, when the thread cannot open the database', async () => {
    const db = openDatabase(tempDb());
    const failures: string[] = [];
    const checkpoints = checkpointInBackground(db.$client, {
      holdWrites: noHold,
      path: join(scratch, 'no-such-directory', 'keygate.db'),
      onFailure: (message) => failures.push(message),
    });
    expect(await checkpoints.started).toBe(false);
    expect(checkpoints.inBackground).toBe(false);
    expect(failures).toHaveLength(1);
    expect(failures[0]).toContain('unable to open');
    expect(autocheckpoint(db.$client)).toBe(AUTOCHECKPOINT_PAGES);
    await checkpoints.stop();
    expect(failures).toHaveLength(1);
    db.$client.close();
  });

  it('gives the checkpoints back to SQLite once stopped', async () => {
    const db = openDatabase(tempDb());
    const failures: string[] = [];
    const checkpoints = checkpointInBackground(db.$client, {
      holdWrites: noHold,
      onFailure: (m) => failures.push(m),
    });
    expect(await checkpoints.started).toBe(true);
    expect(autocheckpoint(db.$client)).toBe(0);
    await checkpoints.stop();
    expect(checkpoints.inBackground).toBe(false);
    expect(autocheckpoint(db.$client)).toBe(AUTOCHECKPOINT_PAGES);
    // Ending the thread on purpose is not a failure.
    expect(failures).toEqual([]);
    db.$client.close();
  });

  it('holds the writes to restart a WAL of restartFrames pages, and releases them after', async () => {
    const path = tempDb();
    const db = openDatabase(path);
    const events: string[] = [];
    let released!: () => void;
    const restarted = new Promise<void>((resolve) => {
      released = resolve;
    });
    const checkpoints = checkpointInBackground(db.$client, {
      holdWrites: () => {
        events.push('held');
        return () => {
          events.push('released');
          released();
        };
      },
      onFailure: (message) => events.push(`failed: ${message}`),
      restartFrames: RESTART_AFTER,
    });
    expect(await checkpoints.started).toBe(true);
    const walHeader = () => readFileSync(`${path}-wal`).subarray(0, 32);
    const checkpointSequence = () => walHeader().readUInt32BE(12);
    const before = checkpointSequence();
    // One transaction of more than RESTART_AFTER pages: a row of ~4 KiB fills a page.
    const client = db.$client;
    client.run('BEGIN');
    const insert = client.prepare(
      'INSERT INTO api_keys (id, secret_hash, user_id, level, name, created_at, expires_at) VALUES (?, ?, 1, 1, ?, 1, 2)',
    );
    for (let n = 0; n < RESTART_AFTER + 100; n++) insert.run(id(n), new Uint8Array(32), 'x'.repeat(4000));
    client.run('COMMIT');
    await restarted;
    expect(events).toEqual(['held', 'released']);
    // The next write starts the WAL from the top: its header's checkpoint sequence moves on.
    client.run('DELETE FROM api_keys WHERE id = ?', [id(0)]);
    expect(checkpointSequence()).toBe(before + 1);
    await checkpoints.stop();
    db.$client.close();
  });
});
