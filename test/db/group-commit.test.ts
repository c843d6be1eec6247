// The group-commit writer: one transaction for writes queued together, one failure rolls back alone.
import { Database } from 'bun:sqlite';
import { describe, expect, it } from 'bun:test';
import { GroupCommitWriter } from '../../src/db/sqlite/group-commit';

function setup() {
  const client = new Database(':memory:');
  client.run('CREATE TABLE t (v INTEGER UNIQUE)');
  const writer = new GroupCommitWriter(client);
  const insert = (v: number) => () => client.run('INSERT INTO t (v) VALUES (?)', [v]);
  const rows = () =>
    (client.query('SELECT v FROM t ORDER BY v').all() as Array<{ v: number }>).map((r) => r.v);
  return { client, writer, insert, rows };
}

describe('GroupCommitWriter', () => {
  it('tells its observer each batch: its size, how long it held the database, and whether it committed', async () => {
    const client = new Database(':memory:');
    client.run('CREATE TABLE t (v INTEGER UNIQUE)');
    const batches: Array<{ size: number; seconds: number; committed: boolean }> = [];
    const writer = new GroupCommitWriter(client, (batch) => batches.push(batch));
    const insert = (v: number) => () => client.run('INSERT INTO t (v) VALUES (?)', [v]);
    await Promise.allSettled([1, 2, 2].map((v) => writer.write(insert(v)))); // the second 2 fails alone
    await writer.write(insert(3));
    expect(batches.map(({ size, committed }) => ({ size, committed }))).toEqual([
      { size: 3, committed: true },
      { size: 1, committed: true },
    ]);
    for (const batch of batches) expect(batch.seconds).toBeGreaterThanOrEqual(0);
  });

  it('commits writes queued in the same turn in one transaction', async () => {
    const client = new Database(':memory:');
    client.run('CREATE TABLE t (v INTEGER UNIQUE)');
    // Count COMMITs as they run: wrap the statement the writer prepares for them.
    let commits = 0;
    const prepare = client.prepare.bind(client);
    client.prepare = ((sql: string) => {
      const statement = prepare(sql);
      if (sql !== 'COMMIT') return statement;
      const run = statement.run.bind(statement);
      statement.run = (() => {
        commits++;
        return run();
      }) as typeof statement.run;
      return statement;
    }) as typeof client.prepare;
    const writer = new GroupCommitWriter(client);
    const insert = (v: number) => () => client.run('INSERT INTO t (v) VALUES (?)', [v]);
    await Promise.all([1, 2, 3, 4, 5].map((v) => writer.write(insert(v))));
    expect(commits).toBe(1);
    expect(client.query('SELECT count(*) AS n FROM t').get()).toEqual({ n: 5 });
    await writer.write(insert(6));
    expect(commits).toBe(2);
  });

  it('resolves only after the commit: the row is visible when the promise settles, not before', async () => {
    const { writer, insert, rows } = setup();
    const pending = writer.write(insert(1));
    expect(rows()).toEqual([]);
    await pending;
    expect(rows()).toEqual([1]);
  });

  it('rolls back a failing job alone; the others commit', async () => {
    const { writer, insert, rows } = setup();
    const results = await Promise.allSettled([
      writer.write(insert(1)),
      writer.write(() => {
        insert(2)();
        insert(1)(); // UNIQUE violation: this job's row 2 must go too
      }),
      writer.write(insert(3)),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(rows()).toEqual([1, 3]);
  });

  it('fails every job of a batch whose transaction a job ended, and recovers afterwards', async () => {
    const { client, writer, insert, rows } = setup();
    const gone = Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
    const failed = await Promise.allSettled([
      writer.write(insert(1)),
      writer.write(() => {
        client.run('ROLLBACK'); // as SQLite does itself on some errors (SQLITE_FULL, SQLITE_IOERR)
        throw gone;
      }),
    ]);
    // Both with the job's own error, which the store maps to 503 (not "no such savepoint").
    expect(failed).toEqual([
      { status: 'rejected', reason: gone },
      { status: 'rejected', reason: gone },
    ]);
    expect(rows()).toEqual([]);
    await writer.write(insert(2));
    expect(rows()).toEqual([2]);
  });

  it('passes a job its return value', async () => {
    const { writer } = setup();
    expect(await writer.write(() => 42)).toBe(42);
  });

  it('rejects every job of a batch whose commit cannot start, and recovers afterwards', async () => {
    const { client, writer, insert, rows } = setup();
    client.run('BEGIN'); // an open transaction makes BEGIN IMMEDIATE fail
    const failed = await Promise.allSettled([writer.write(insert(1)), writer.write(insert(2))]);
    expect(failed.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    client.run('ROLLBACK');
    await writer.write(insert(3));
    expect(rows()).toEqual([3]);
  });

  it('begins no transaction while held: writes queue, and commit together once every hold is released', async () => {
    const { writer, insert, rows } = setup();
    const releaseFirst = writer.hold();
    const releaseSecond = writer.hold();
    const written = [writer.write(insert(1)), writer.write(insert(2))];
    let settled = false;
    void Promise.all(written).then(() => {
      settled = true;
    });
    // Several turns of the event loop pass; nothing begins.
    for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(rows()).toEqual([]);
    releaseFirst();
    releaseFirst(); // a second call of the same release changes nothing
    for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBe(false);
    releaseSecond();
    await Promise.all(written);
    expect(rows()).toEqual([1, 2]);
  });

  it('drained() waits for queued writes', async () => {
    const { writer, insert, rows } = setup();
    void writer.write(insert(1));
    void writer.write(insert(2));
    await writer.drained();
    expect(rows()).toEqual([1, 2]);
    await writer.drained();
  });
});
