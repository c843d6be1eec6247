// Group commit on PostgreSQL: writes queued together share one transaction, one failing job rolls
// back alone, a job whose request went away commits nothing, a batch that deadlocks with another
// runs again, and a server stopped mid-batch fails the batch as unavailable and the writer recovers.
// Runs in `bun run test:postgres`; plain `bun test` skips it.
import { afterEach, beforeAll, describe, expect, it } from 'bun:test';
import { type ReservedSQL, SQL } from 'bun';
import { RequestGoneError } from '../../src/core/errors';
import {
  type CommitBatch,
  type JobGroup,
  MAX_JOBS_PER_BATCH,
  PostgresGroupCommit,
} from '../../src/db/postgres/group-commit';
import { unavailableCode } from '../../src/db/postgres/unavailable';
import { freshPostgresDatabase, sharedPostgres, startPostgres, TEST_ENGINE } from '../support/postgres';

const closing: Array<() => unknown> = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
});

async function setup({ url, lanes = 2 }: { url?: string; lanes?: number } = {}) {
  const client = new SQL(url ?? (await freshPostgresDatabase()), { max: 4 });
  closing.push(() => client.close());
  await client`CREATE TABLE t (v integer UNIQUE)`;
  const batches: CommitBatch[] = [];
  const writer = new PostgresGroupCommit<ReservedSQL>(client, {
    open: (connection) => connection,
    lanes,
    observer: (batch) => batches.push(batch),
  });
  const insert = (v: number) => (tx: ReservedSQL) => tx`INSERT INTO t (v) VALUES (${v})`.then(() => v);
  const rows = async () =>
    ((await client`SELECT v FROM t ORDER BY v`) as Array<{ v: number }>).map((r) => r.v);
  return { client, writer, batches, insert, rows };
}

describe.skipIf(TEST_ENGINE !== 'postgres')('group commit on PostgreSQL', () => {
  // The run's server starts here, on a busy host in seconds, rather than within the first test's time.
  beforeAll(() => sharedPostgres(), 60_000);

  it('commits writes queued in the same turn in one transaction, and tells its observer', async () => {
    const { writer, batches } = await setup();
    const txid = (tx: ReservedSQL) => tx`SELECT txid_current()::text AS id`.then(([row]) => row.id as string);
    const ids = await Promise.all([1, 2, 3, 4, 5].map(() => writer.write({ run: txid })));
    expect(new Set(ids).size).toBe(1);
    expect(batches.map(({ size, committed }) => ({ size, committed }))).toEqual([
      { size: 5, committed: true },
    ]);
    expect(await writer.write({ run: txid })).not.toBe(ids[0]);
  });

  it(`puts at most ${MAX_JOBS_PER_BATCH} writes in one transaction`, async () => {
    const { writer, batches, insert, rows } = await setup({ lanes: 1 });
    const count = MAX_JOBS_PER_BATCH + 2;
    await Promise.all(Array.from({ length: count }, (_, v) => writer.write({ run: insert(v) })));
    expect(batches.map((batch) => batch.size)).toEqual([MAX_JOBS_PER_BATCH, 2]);
    expect((await rows()).length).toBe(count);
  });

  it('rolls back a failing job alone; the others commit', async () => {
    const { writer, insert, rows } = await setup();
    const results = await Promise.allSettled([
      writer.write({ run: insert(1) }),
      writer.write({
        run: async (tx) => {
          await insert(2)(tx);
          await insert(1)(tx); // a unique violation: this job's row 2 must go too
        },
      }),
      writer.write({ run: insert(3) }),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(((results[1] as PromiseRejectedResult).reason as { errno?: string }).errno).toBe('23505');
    expect(await rows()).toEqual([1, 3]);
  });

  it('runs a group of jobs standing together as one statement; should it fail, each runs alone', async () => {
    const { writer, batches, insert, rows } = await setup();
    const statements: number[][] = [];
    const inserts: JobGroup<number, number | undefined> = {
      statement: (inputs) => {
        statements.push([...inputs]);
        return { sql: 'INSERT INTO t (v) SELECT unnest($1::integer[]) RETURNING v', params: [`{${inputs}}`] };
      },
      values: (rows, inputs) => {
        const written = new Set((rows as Array<{ v: number }>).map((row) => row.v));
        return inputs.map((v) => (written.has(v) ? v : undefined));
      },
    };
    const grouped = (v: number, signal?: AbortSignal) => writer.write({ group: inserts, input: v, signal });
    const goneBefore = new AbortController();
    goneBefore.abort();
    const results = await Promise.allSettled([
      grouped(1),
      grouped(2),
      grouped(1), // a unique violation: the group's statement fails, then this job alone
      grouped(3),
      grouped(4, goneBefore.signal),
      writer.write({ run: insert(5) }), // another kind of job ends the group
      grouped(7),
      grouped(8),
    ]);
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : r.reason.constructor.name))).toEqual([
      1,
      2,
      'PostgresError',
      3,
      'RequestGoneError',
      5,
      7,
      8,
    ]);
    expect(statements).toEqual([[1, 2, 1, 3], [1], [2], [1], [3], [7, 8]]);
    expect(batches.map(({ size, committed }) => ({ size, committed }))).toEqual([
      { size: 8, committed: true },
    ]);
    expect(await rows()).toEqual([1, 2, 3, 5, 7, 8]);
  });

  it('runs a group again without the jobs whose request went away while it ran', async () => {
    const { writer, rows } = await setup();
    const goneWhile = new AbortController();
    const inserts: JobGroup<number, number> = {
      statement: (inputs) => ({
        sql: 'INSERT INTO t (v) SELECT unnest($1::integer[])',
        params: [`{${inputs}}`],
      }),
      values: (_rows, inputs) => {
        goneWhile.abort();
        return [...inputs];
      },
    };
    const results = await Promise.allSettled([
      writer.write({ group: inserts, input: 1 }),
      writer.write({ group: inserts, input: 2, signal: goneWhile.signal }),
      writer.write({ group: inserts, input: 3 }),
    ]);
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : r.reason.constructor.name))).toEqual([
      1,
      'RequestGoneError',
      3,
    ]);
    expect(await rows()).toEqual([1, 3]);
  });

  it('commits nothing of a job whose request went away, before or while it ran', async () => {
    const { writer, insert, rows } = await setup();
    const goneBefore = new AbortController();
    goneBefore.abort();
    const goneWhile = new AbortController();
    const results = await Promise.allSettled([
      writer.write({ run: insert(1) }),
      writer.write({ run: insert(2), signal: goneBefore.signal }),
      writer.write({
        run: async (tx) => {
          await insert(3)(tx);
          goneWhile.abort();
        },
        signal: goneWhile.signal,
      }),
      writer.write({ run: insert(4) }),
    ]);
    expect(results.map((r) => (r.status === 'fulfilled' ? 'ok' : r.reason.constructor.name))).toEqual([
      'ok',
      'RequestGoneError',
      'RequestGoneError',
      'ok',
    ]);
    expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(RequestGoneError);
    expect(await rows()).toEqual([1, 4]);
  });

  it('runs a job whose counter row another transaction holds in a batch of its own, once it is free', async () => {
    const { client, writer, insert, rows } = await setup();
    await client`INSERT INTO user_key_counts (user_id, keys) VALUES (7, 0)`;
    const held = await client.reserve();
    closing.push(() => held.release());
    await held`BEGIN`;
    await held`SELECT 1 FROM user_key_counts WHERE user_id = 7 FOR UPDATE`;
    const waiting = writer.write({ users: [7], run: insert(7) });
    // Another user's write queued in the same turn commits without waiting for user 7's row.
    expect(await writer.write({ users: [8], run: insert(8) })).toBe(8);
    expect(await rows()).toEqual([8]);
    await held`COMMIT`;
    expect(await waiting).toBe(7);
    expect(await rows()).toEqual([7, 8]);
  });

  it('runs a batch again after PostgreSQL chose it as a deadlock victim', async () => {
    const url = await freshPostgresDatabase();
    const { client, insert, rows } = await setup({ url });
    await client.unsafe(`ALTER DATABASE ${new URL(url).pathname.slice(1)} SET deadlock_timeout = '50ms'`);
    await client`CREATE TABLE r (id integer PRIMARY KEY, n integer NOT NULL)`;
    await client`INSERT INTO r VALUES (1, 0), (2, 0)`;
    // Two writers, as two replicas would have, each taking the two rows in the other order.
    const writers = [1, 2].map(
      () => new PostgresGroupCommit<ReservedSQL>(client, { open: (connection) => connection, lanes: 1 }),
    );
    const bothHoldOne = Promise.withResolvers<void>();
    let holding = 0;
    let runs = 0;
    const crossing = (first: number, second: number, v: number) => async (tx: ReservedSQL) => {
      runs++;
      await tx`UPDATE r SET n = n + 1 WHERE id = ${first}`;
      if (++holding === 2) bothHoldOne.resolve();
      await bothHoldOne.promise;
      await tx`UPDATE r SET n = n + 1 WHERE id = ${second}`;
      return insert(v)(tx);
    };
    const [a, b] = writers as [PostgresGroupCommit<ReservedSQL>, PostgresGroupCommit<ReservedSQL>];
    expect(
      await Promise.all([a.write({ run: crossing(1, 2, 1) }), b.write({ run: crossing(2, 1, 2) })]),
    ).toEqual([1, 2]);
    expect(runs).toBe(3); // the victim ran twice
    expect(await rows()).toEqual([1, 2]);
    expect(await client`SELECT n FROM r ORDER BY id`).toEqual([{ n: 2 }, { n: 2 }]);
  });

  it('fails the whole batch as unavailable when the server stops mid-batch, and recovers after', async () => {
    const server = await startPostgres();
    closing.push(() => server.destroy());
    const { writer, batches, insert, rows } = await setup({ url: server.url });
    const started = Promise.withResolvers<void>();
    const batch = [
      writer.write({ run: insert(1) }),
      writer.write({
        run: async (tx) => {
          started.resolve();
          await tx`SELECT pg_sleep(30)`;
        },
      }),
      writer.write({ run: insert(3) }),
    ];
    const settled = Promise.allSettled(batch);
    await started.promise;
    server.stop('immediate');
    const results = await settled;
    for (const result of results) {
      expect(result.status).toBe('rejected');
      expect(unavailableCode((result as PromiseRejectedResult).reason)).toBeDefined();
    }
    expect(batches.at(-1)?.committed).toBe(false);
    server.start();
    expect(await writer.write({ run: insert(4) })).toBe(4);
    expect(await rows()).toEqual([4]);
  }, 60_000);

  it('drains: resolves once every queued write has settled', async () => {
    const { writer, insert, rows } = await setup();
    const writes = [1, 2, 3].map((v) => writer.write({ run: insert(v) }));
    await writer.drained();
    expect(await rows()).toEqual([1, 2, 3]);
    await Promise.all(writes);
    await writer.drained(); // idle: at once
  });
});
