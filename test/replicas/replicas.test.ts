// Several keygate processes on one PostgreSQL database (docs/replicas.md): migrating once when they start
// together, the per-user cap across replicas, revocation seen by every replica, purge without double
// work, kill -9 losing nothing acknowledged, and the database going away and coming back.
// Runs in `bun run test:postgres`; plain `bun test` (SQLite) skips it.
import { afterAll, describe, expect, it } from 'bun:test';
import { embeddedPostgresMigrations } from '../../src/db/migrations.macro';
import { startPostgres, TEST_ENGINE } from '../support/postgres';
import {
  bearerFor,
  freshReplicaDatabase,
  type Replica,
  startReplicas,
  stopReplicas,
  within,
} from '../support/replicas';

afterAll(stopReplicas);

const createBody = { name: 'replica', level: 3, expiresIn: 3600 };

describe.skipIf(TEST_ENGINE !== 'postgres')('replicas on one PostgreSQL database', () => {
  it('three replicas starting together on an empty database migrate it once, and all serve', async () => {
    const { url, sql } = await freshReplicaDatabase('replicas');
    const three = await startReplicas(url, 3);
    const [{ n }] = await sql`SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations`;
    expect(n).toBe(embeddedPostgresMigrations().length);
    for (const replica of three) expect((await replica.req('GET', '/health')).status).toBe(200);
    await sql.close();
  }, 60_000);

  it('a key deleted or rotated on one replica is refused by the others without waiting for the cache', async () => {
    const { url, sql } = await freshReplicaDatabase('replicas');
    // An hour of cache: only LISTEN/NOTIFY can make the other replicas forget the key in time.
    const [a, b, c] = (await startReplicas(url, 3, { KEY_CACHE_SECONDS: '3600' })) as [
      Replica,
      Replica,
      Replica,
    ];
    const headers = await bearerFor(7);
    const created = (await a.req('POST', '/apikeys/jwt', { headers, body: createBody })).json.apikey;
    const verify = (replica: Replica, key: { key: string; secret: string }) =>
      replica.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret } });
    for (const replica of [b, c]) expect((await verify(replica, created)).json.code).toBe('VALID'); // now cached
    expect((await a.req('DELETE', `/apikeys/${created.key}/jwt`, { headers })).status).toBe(204);
    for (const replica of [b, c]) {
      await within(1000, async () => (await verify(replica, created)).json.code === 'NOT_FOUND');
    }

    const second = (await a.req('POST', '/apikeys/jwt', { headers, body: createBody })).json.apikey;
    for (const replica of [b, c]) expect((await verify(replica, second)).json.code).toBe('VALID');
    const rotated = await b.req('POST', `/apikeys/${second.key}/rotate/jwt`, { headers });
    expect(rotated.status).toBe(201);
    for (const replica of [a, c]) {
      await within(1000, async () => (await verify(replica, second)).json.code === 'EXPIRED');
      expect((await verify(replica, rotated.json.apikey)).json.code).toBe('VALID');
    }
    await sql.close();
  }, 60_000);

  it('an update on one replica is applied by the others within a second, whatever their cache', async () => {
    const { url, sql } = await freshReplicaDatabase('replicas');
    const [a, b] = (await startReplicas(url, 2, { KEY_CACHE_SECONDS: '3600' })) as [Replica, Replica];
    const headers = await bearerFor(8);
    const created = (await a.req('POST', '/apikeys/jwt', { headers, body: createBody })).json.apikey;
    const verify = () =>
      b.req('POST', '/apikeys/verify', { body: { key: created.key, secret: created.secret } });
    expect((await verify()).json.code).toBe('VALID'); // now cached on b
    const disabled = await a.req('PATCH', `/apikeys/${created.key}/jwt`, {
      headers,
      body: { enabled: false, meta: { tenant: 'acme' } },
    });
    expect(disabled.status).toBe(200);
    const ms = await within(1000, async () => (await verify()).json.code === 'DISABLED');
    expect((await verify()).json.principal.meta).toEqual({ tenant: 'acme' });
    expect(ms).toBeLessThan(1000);
    expect(
      (await b.req('PATCH', `/apikeys/${created.key}/jwt`, { headers, body: { enabled: true } })).status,
    ).toBe(200);
    await within(
      1000,
      async () =>
        (await a.req('POST', '/apikeys/verify', { body: { key: created.key, secret: created.secret } })).json
          .code === 'VALID',
    );
    await sql.close();
  }, 60_000);

  it('the per-user cap holds under concurrent creates spread over three replicas', async () => {
    const { url, sql } = await freshReplicaDatabase('replicas');
    const three = await startReplicas(url, 3, { MAX_KEYS_PER_USER: '20' });
    const headers = await bearerFor(42);
    const statuses = await Promise.all(
      Array.from({ length: 90 }, (_, i) =>
        (three[i % 3] as Replica)
          .req('POST', '/apikeys/jwt', { headers, body: createBody })
          .then((r) => r.status),
      ),
    );
    expect(statuses.filter((status) => status === 201)).toHaveLength(20);
    expect(statuses.filter((status) => status === 409)).toHaveLength(70);
    const [{ n }] = await sql`SELECT count(*)::int AS n FROM api_keys WHERE user_id = 42`;
    expect(n).toBe(20);
    await sql.close();
  }, 60_000);

  it('replicas purging together remove every expired key once: their purged counts add up', async () => {
    const { url, sql } = await freshReplicaDatabase('replicas');
    // Migrate first, then 5,000 expired keys and 10 live ones straight into the table.
    const [first] = await startReplicas(url, 1);
    await (first as Replica).stop();
    const now = Date.now();
    await sql`INSERT INTO api_keys (id, secret_hash, user_id, level, name, created_at, expires_at)
      SELECT 'kg_expired' || lpad(i::text, 19, '0'), repeat('0', 64), i % 100, 1, 'old', ${now - 7200_000}, ${now - 3600_000}
      FROM generate_series(1, 5000) AS i`;
    await sql`INSERT INTO api_keys (id, secret_hash, user_id, level, name, created_at, expires_at)
      SELECT 'kg_liveeeee' || lpad(i::text, 19, '0'), repeat('0', 64), 1, 1, 'live', ${now}, ${now + 3600_000}
      FROM generate_series(1, 10) AS i`;
    const three = await startReplicas(url, 3, { PURGE_INTERVAL_SECONDS: '1' });
    await within(30_000, async () => {
      const [{ n }] = await sql`SELECT count(*)::int AS n FROM api_keys`;
      return n === 10;
    });
    // A pass logs its count when it ends; stopping waits for running passes and flushes the log.
    for (const replica of three) expect(await replica.stop()).toBe(0);
    const purged = three
      .flatMap((replica) => replica.lines('apikeys.purged'))
      .map((line) => line.count as number);
    expect(purged.reduce((sum, count) => sum + count, 0)).toBe(5000);
    await sql.close();
  }, 60_000);

  it('kill -9 of a replica loses no acknowledged create: every 201 is there on another replica', async () => {
    const { url, sql } = await freshReplicaDatabase('replicas');
    const [victim, survivor] = (await startReplicas(url, 2)) as [Replica, Replica];
    const headers = await bearerFor(9);
    const acknowledged: string[] = [];
    let killed = false;
    const worker = async () => {
      while (!killed) {
        try {
          const response = await victim.req('POST', '/apikeys/jwt', { headers, body: createBody });
          if (response.status === 201) acknowledged.push(response.json.apikey.key);
        } catch {
          return; // the connection died with the process
        }
      }
    };
    const workers = Array.from({ length: 8 }, worker);
    await within(10_000, async () => acknowledged.length >= 200);
    await victim.kill();
    killed = true;
    await Promise.all(workers);
    const [{ n }] =
      await sql`SELECT count(*)::int AS n FROM api_keys WHERE id = ANY(${sql.array(acknowledged)})`;
    expect(n).toBe(acknowledged.length);
    const last = acknowledged.at(-1) as string;
    expect((await survivor.req('GET', `/apikeys/${last}/jwt`, { headers })).status).toBe(200);
    await sql.close();
  }, 60_000);

  it('while the database is down, requests that need it and /health answer 503; then it recovers alone, LISTEN too', async () => {
    // Its own server: stopping the shared one would stop every other test's databases.
    const server = await startPostgres();
    try {
      // An hour of key cache: after the restart only a re-established LISTEN can evict in time.
      const [a, b] = (await startReplicas(server.url, 2, { KEY_CACHE_SECONDS: '3600' })) as [
        Replica,
        Replica,
      ];
      const headers = await bearerFor(5);
      expect((await a.req('POST', '/apikeys/jwt', { headers, body: createBody })).status).toBe(201);
      server.stop();
      const down = await a.req('POST', '/apikeys/jwt', { headers, body: createBody });
      expect(down.status).toBe(503);
      expect(down.json.result).toBe('error');
      expect((await a.req('GET', '/health')).status).toBe(503);
      // Needs no database: a token is checked in memory.
      const token = headers.authorization?.slice('Bearer '.length);
      expect((await a.req('POST', '/apikeys/verify', { body: { token } })).status).toBe(200);
      server.start();
      for (const replica of [a, b]) {
        await within(10_000, async () => (await replica.req('GET', '/health')).status === 200);
      }
      const key = (await a.req('POST', '/apikeys/jwt', { headers, body: createBody })).json.apikey;
      const verify = () => b.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret } });
      // The listener reconnects with a backoff of its own: wait until B sees A's writes by NOTIFY again.
      expect((await verify()).json.code).toBe('VALID');
      expect((await a.req('DELETE', `/apikeys/${key.key}/jwt`, { headers })).status).toBe(204);
      await within(5_000, async () => (await verify()).json.code === 'NOT_FOUND');
      for (const replica of [a, b]) expect(replica.lines('unexpected error')).toHaveLength(0);
      for (const replica of [a, b]) expect(await replica.stop()).toBe(0);
    } finally {
      server.destroy();
    }
  }, 60_000);
});
