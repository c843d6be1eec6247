// Usage on replicas sharing one PostgreSQL database: each flushes its own counts every
// USAGE_FLUSH_SECONDS, and they add up; lastUsedAt reaches the other replicas within the interval;
// a graceful stop writes what is left, a kill -9 loses at most the counts since the last flush.
// Runs in `bun run test:postgres`; plain `bun test` (SQLite) skips it.
import { afterAll, describe, expect, it } from 'bun:test';
import { SQL } from 'bun';
import { generateSecret } from '../../src/apikeys/secrets';
import { sharedPostgres, TEST_ENGINE } from '../support/postgres';
import { bearerFor, type Replica, startReplica } from '../support/replicas';

const running: Replica[] = [];
afterAll(async () => {
  await Promise.all(running.map((replica) => replica.stop()));
});

let databases = 0;
async function emptyDatabase(): Promise<{ url: string; sql: SQL }> {
  const { server } = await sharedPostgres();
  const url = server.createDatabase(`keygate_usage_replicas_${process.pid}_${++databases}`);
  return { url, sql: new SQL(url, { max: 2 }) };
}

/** Polls `check` every 50 ms until it holds or `limitMs` passes; resolves with the ms it took. */
async function within(limitMs: number, check: () => Promise<boolean>): Promise<number> {
  const started = performance.now();
  while (performance.now() - started < limitMs) {
    if (await check()) return performance.now() - started;
    await Bun.sleep(50);
  }
  throw new Error(`not within ${limitMs} ms`);
}

const createBody = { name: 'usage', level: 3, expiresIn: 3600 };

describe.skipIf(TEST_ENGINE !== 'postgres')('usage on replicas of one PostgreSQL database', () => {
  it('counts written by two replicas add up, and each sees the other’s within the flush interval', async () => {
    const { url, sql } = await emptyDatabase();
    const [a, b] = await Promise.all([
      startReplica(url, { USAGE_FLUSH_SECONDS: '1' }),
      startReplica(url, { USAGE_FLUSH_SECONDS: '1' }),
    ]);
    running.push(a, b);
    const headers = await bearerFor(7);
    const key = (await a.req('POST', '/apikeys/jwt', { headers, body: createBody })).json.apikey;
    const verify = (replica: Replica, secret = key.secret) =>
      replica.req('POST', '/apikeys/verify', { body: { key: key.key, secret } });
    for (let i = 0; i < 3; i++) expect((await verify(a)).json.code).toBe('VALID');
    for (let i = 0; i < 2; i++) expect((await verify(b)).json.code).toBe('VALID');
    expect((await verify(b, generateSecret())).json.code).toBe('NOT_FOUND'); // a wrong secret: denied
    const usageOn = async (replica: Replica) =>
      (await replica.req('GET', `/apikeys/${key.key}/usage/jwt`, { headers })).json.usage;
    // Each replica answers its own counts at once and the other's once flushed (1 s).
    await within(5000, async () => {
      const [onA, onB] = [await usageOn(a), await usageOn(b)];
      return (
        onA.length === 1 &&
        onA[0].valid === 5 &&
        onA[0].denied === 1 &&
        JSON.stringify(onA) === JSON.stringify(onB)
      );
    });
    const [row] = await sql`SELECT valid::int, denied::int FROM key_usage WHERE key_id = ${key.key}`;
    expect([row.valid, row.denied]).toEqual([5, 1]);
    const [{ last }] = await sql`SELECT last_used_at::float8 AS last FROM api_keys WHERE id = ${key.key}`;
    const shown = (await a.req('GET', `/apikeys/${key.key}/jwt`, { headers })).json.apikey.lastUsedAt;
    expect(Date.parse(shown)).toBe(last);
    await sql.close();
  }, 60_000);

  it('a graceful stop writes what is left; a kill -9 loses at most the counts since the last flush', async () => {
    const { url, sql } = await emptyDatabase();
    // An interval far longer than the test: only the stop writes.
    const graceful = await startReplica(url, { USAGE_FLUSH_SECONDS: '300' });
    running.push(graceful);
    const headers = await bearerFor(7);
    const key = (await graceful.req('POST', '/apikeys/jwt', { headers, body: createBody })).json.apikey;
    const verify = (replica: Replica) =>
      replica.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret } });
    for (let i = 0; i < 4; i++) await verify(graceful);
    const stored = async () =>
      (await sql`SELECT coalesce(sum(valid), 0)::int AS n FROM key_usage WHERE key_id = ${key.key}`)[0].n;
    expect(await stored()).toBe(0);
    expect(await graceful.stop()).toBe(0);
    expect(await stored()).toBe(4);
    const [{ last }] = await sql`SELECT last_used_at::float8 AS last FROM api_keys WHERE id = ${key.key}`;
    expect(last).toBeGreaterThan(0);

    const killed = await startReplica(url, { USAGE_FLUSH_SECONDS: '300' });
    running.push(killed);
    for (let i = 0; i < 3; i++) await verify(killed);
    await killed.kill();
    // Documented: what was counted since the last flush is gone with the process.
    expect(await stored()).toBe(4);
    await sql.close();
  }, 60_000);
});
