// The operator's routes across replicas on one PostgreSQL database: every key of a user revoked on
// one replica is refused by the other within a second (one notification naming the user, whatever
// the key cache holds), a user's maxKeys holds exactly under concurrent creates over two replicas, and
// a policy changed on one replica is applied by the other within a second.
// Runs in `bun run test:postgres`; plain `bun test` (SQLite) skips it.
import { afterAll, describe, expect, it } from 'bun:test';
import { TEST_ENGINE } from '../support/postgres';
import {
  bearerFor,
  freshReplicaDatabase,
  operatorBearer,
  type Replica,
  startReplicas,
  stopReplicas,
  within,
} from '../support/replicas';

afterAll(stopReplicas);

async function twoReplicas(env: Record<string, string> = {}) {
  const { url, sql } = await freshReplicaDatabase('operator');
  return { pair: (await startReplicas(url, 2, env)) as [Replica, Replica], sql };
}

const createBody = { name: 'replica', level: 3, expiresIn: 3600 };

describe.skipIf(TEST_ENGINE !== 'postgres')('the operator’s routes over two replicas', () => {
  it('revoking every key of a user on one replica: the other refuses them all within a second', async () => {
    // An hour of cache: only the notification can make the other replica forget the keys in time.
    const { pair, sql } = await twoReplicas({ KEY_CACHE_SECONDS: '3600' });
    const [a, b] = pair;
    const headers = await bearerFor(42);
    const keys = await Promise.all(
      Array.from(
        { length: 5 },
        async () => (await a.req('POST', '/apikeys/jwt', { headers, body: createBody })).json.apikey,
      ),
    );
    const other = (await a.req('POST', '/apikeys/jwt', { headers: await bearerFor(7), body: createBody }))
      .json.apikey;
    // 10,000 more of user 42, seeded in one statement.
    await sql`INSERT INTO api_keys (id, secret_hash, user_id, level, name, created_at, expires_at)
      SELECT 'kg_seed' || lpad(i::text, 22, '0'), repeat('00', 32), 42, 1, 'seeded', ${Date.now()}::bigint, ${Date.now() + 3_600_000}::bigint
      FROM generate_series(1, 10000) AS i`;
    const verify = (replica: Replica, key: { key: string; secret: string }) =>
      replica.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret } });
    for (const key of [...keys, other]) expect((await verify(b, key)).json.code).toBe('VALID'); // now cached

    const started = performance.now();
    const revoked = await a.req('DELETE', '/admin/users/42/apikeys', { headers: await operatorBearer() });
    const deleteMs = performance.now() - started;
    expect(revoked.json).toEqual({ result: 'success', deleted: 10_005 });
    const seenMs = await within(1000, async () => {
      const codes = await Promise.all(keys.map(async (key) => (await verify(b, key)).json.code));
      return codes.every((code) => code === 'NOT_FOUND');
    });
    expect((await verify(b, other)).json.code).toBe('VALID');
    expect(a.lines('apikeys.revoked')).toEqual([
      expect.objectContaining({ userId: 42, count: 10_005, by: 'admin:ops' }),
    ]);
    console.info(
      `revoke-all of 10,005 keys over HTTP: ${deleteMs.toFixed(0)} ms; refused on the other replica after ${seenMs.toFixed(0)} ms`,
    );
    await sql.close();
  }, 60_000);

  it('a user’s maxKeys holds exactly under concurrent creates over two replicas', async () => {
    const { pair, sql } = await twoReplicas({ MAX_KEYS_PER_USER: '50' });
    const [a, b] = pair;
    const policy = { ratelimit: null, credits: null, maxKeys: 7, maxLevel: null };
    expect(
      (await a.req('PUT', '/admin/users/42/policy', { headers: await operatorBearer(), body: policy }))
        .status,
    ).toBe(200);
    const headers = await bearerFor(42);
    const statuses = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        (i % 2 === 0 ? a : b)
          .req('POST', '/apikeys/jwt', { headers, body: createBody })
          .then((r) => r.status),
      ),
    );
    expect(statuses.filter((status) => status === 201)).toHaveLength(7);
    expect(statuses.filter((status) => status === 409)).toHaveLength(33);
    const [{ n }] = await sql`SELECT count(*)::int AS n FROM api_keys WHERE user_id = 42`;
    expect(n).toBe(7);
    await sql.close();
  }, 60_000);

  it('a policy put on one replica is applied by the other within a second, whatever its cache', async () => {
    const { pair, sql } = await twoReplicas({ KEY_CACHE_SECONDS: '3600' });
    const [a, b] = pair;
    const headers = await bearerFor(42);
    const key = (await b.req('POST', '/apikeys/jwt', { headers, body: createBody })).json.apikey;
    // b now knows user 42 has no policy.
    expect((await b.req('GET', `/apikeys/${key.key}/jwt`, { headers })).json.apikey.policy).toBeUndefined();
    const policy = { ratelimit: null, credits: null, maxKeys: null, maxLevel: 3 };
    await a.req('PUT', '/admin/users/42/policy', { headers: await operatorBearer(), body: policy });
    await within(1000, async () => {
      const info = (await b.req('GET', `/apikeys/${key.key}/jwt`, { headers })).json.apikey;
      return info.policy?.maxLevel === 3;
    });
    const refused = await b.req('POST', '/apikeys/jwt', { headers, body: { ...createBody, level: 4 } });
    expect(refused.status).toBe(403);
    await a.req('DELETE', '/admin/users/42/policy', { headers: await operatorBearer() });
    await within(
      1000,
      async () =>
        (await b.req('POST', '/apikeys/jwt', { headers, body: { ...createBody, level: 4 } })).status === 201,
    );
    await sql.close();
  }, 60_000);
});
