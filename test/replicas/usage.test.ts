// Usage on replicas sharing one PostgreSQL database: each flushes its own counts every
// USAGE_FLUSH_SECONDS, and they add up; lastUsedAt reaches the other replicas within the interval;
// a graceful stop writes what is left, a kill -9 loses at most the counts since the last flush.
// Runs in `bun run test:postgres`; plain `bun test` (SQLite) skips it.
import { afterAll, describe, expect, it } from 'bun:test';
import { generateSecret } from '../../src/apikeys/secrets';
import { TEST_ENGINE } from '../support/postgres';
import {
  bearerFor,
  freshReplicaDatabase,
  type Replica,
  startReplicas,
  stopReplicas,
  within,
} from '../support/replicas';

afterAll(stopReplicas);

const createBody = { name: 'usage', level: 3, expiresIn: 3600 };

describe.skipIf(TEST_ENGINE !== 'postgres')('usage on replicas of one PostgreSQL database', () => {
  it('counts written by two replicas add up, and each sees the other’s within the flush interval', async () => {
    const { url, sql } = await freshReplicaDatabase('usage_replicas');
    const [a, b] = (await startReplicas(url, 2, { USAGE_FLUSH_SECONDS: '1' })) as [Replica, Replica];
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
    const { url, sql } = await freshReplicaDatabase('usage_replicas');
    // An interval far longer than the test: only the stop writes.
    const [graceful] = (await startReplicas(url, 1, { USAGE_FLUSH_SECONDS: '300' })) as [Replica];
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

    const [killed] = (await startReplicas(url, 1, { USAGE_FLUSH_SECONDS: '300' })) as [Replica];
    for (let i = 0; i < 3; i++) await verify(killed);
    await killed.kill();
    // Documented: what was counted since the last flush is gone with the process.
    expect(await stored()).toBe(4);
    await sql.close();
  }, 60_000);
});
