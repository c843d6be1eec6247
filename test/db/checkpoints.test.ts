// WAL checkpoints on their own thread: a serving keygate's commits reach the database file without
// SQLite's automatic checkpoint, which comes back whenever the thread is not running.
import { afterAll, describe, expect, it } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AUTOCHECKPOINT_PAGES, checkpointInBackground } from '../../src/db/checkpoints';
import { openDatabase } from '../../src/db/open';
import { openStore } from '../../src/keygate';
import { reachesDatabaseFile } from '../support/database-file';
import { id, row } from '../support/rows';

const scratch = mkdtempSync(join(tmpdir(), 'keygate-checkpoints-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const tempDb = () => join(mkdtempSync(join(scratch, 'db-')), 'keygate.db');

const autocheckpoint = (client: { query(sql: string): { get(): unknown } }) =>
  (client.query('PRAGMA wal_autocheckpoint').get() as { wal_autocheckpoint: number }).wal_autocheckpoint;

describe('a serving keygate on SQLite', () => {
  it('turns the automatic checkpoint off and checkpoints each commit into the file from its own thread', async () => {
    const path = tempDb();
    const { store, sqlite } = await openStore({ databaseUrl: path, databasePoolSize: 1 });
    try {
      expect(autocheckpoint(sqlite as never)).toBe(0);
      // One small commit: far below the 1000 pages after which SQLite itself would checkpoint.
      await store.insertKeyWithinLimit(row(id(1)), 10);
      expect(await reachesDatabaseFile(path, id(1))).toBe(true);
    } finally {
      await store.close();
    }
  });

  it('leaves the automatic checkpoint on for a one-shot command', async () => {
    const path = tempDb();
    const { store, sqlite } = await openStore({ databaseUrl: path, databasePoolSize: 1 }, { serving: false });
    try {
      expect(autocheckpoint(sqlite as never)).toBe(AUTOCHECKPOINT_PAGES);
      await store.insertKeyWithinLimit(row(id(2)), 10);
      expect(readFileSync(path).includes(id(2))).toBe(false);
    } finally {
      await store.close();
    }
  });
});

describe('checkpointInBackground', () => {
  it('keeps the automatic checkpoint, and says why, when the thread cannot open the database', async () => {
    const db = openDatabase(tempDb());
    const failures: string[] = [];
    const checkpoints = await checkpointInBackground(db.$client, {
      path: join(scratch, 'no-such-directory', 'keygate.db'),
      onFailure: (message) => failures.push(message),
    });
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
    const checkpoints = await checkpointInBackground(db.$client, { onFailure: (m) => failures.push(m) });
    expect(checkpoints.inBackground).toBe(true);
    expect(autocheckpoint(db.$client)).toBe(0);
    await checkpoints.stop();
    expect(checkpoints.inBackground).toBe(false);
    expect(autocheckpoint(db.$client)).toBe(AUTOCHECKPOINT_PAGES);
    // Ending the thread on purpose is not a failure.
    expect(failures).toEqual([]);
    db.$client.close();
  });
});
