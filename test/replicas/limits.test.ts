// Rate limits and credits on replicas sharing one PostgreSQL database, over real sockets: a burst
// spread over the replicas gets at most the limit together (and, without a crash, all of it), one
// replica alone can use the whole limit, and concurrent spending never gives more than was granted.
// Runs in `bun run test:postgres`; plain `bun test` (SQLite) skips it.
import { afterAll, describe, expect, it } from 'bun:test';
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

type Key = { key: string; secret: string };
let nextUser = 500;

async function create(on: Replica, settings: Record<string, unknown>): Promise<Key> {
  const response = await on.req('POST', '/apikeys/jwt', {
    headers: await bearerFor(nextUser++),
    body: { name: 'limited', level: 3, expiresIn: 3600, ...settings },
  });
  if (response.status !== 201) throw new Error(`create failed: ${response.status}`);
  return response.json.apikey;
}

const verify = (on: Replica, key: Key, extra: Record<string, unknown> = {}) =>
  on.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret, ...extra } });

/** `total` verifications of `key` sent at once, the i-th to `over[i % over.length]`; their codes counted. */
async function burst(over: Replica[], key: Key, total: number): Promise<Record<string, number>> {
  const answers = await Promise.all(
    Array.from({ length: total }, (_, i) => verify(over[i % over.length] as Replica, key)),
  );
  const counts: Record<string, number> = {};
  for (const { status, json } of answers) {
    const code = status === 200 ? json.code : `HTTP ${status}`;
    counts[code] = (counts[code] ?? 0) + 1;
  }
  return counts;
}

describe.skipIf(TEST_ENGINE !== 'postgres')('rate limits and credits on replicas of one database', () => {
  it('a burst of limit + k spread over two replicas gets exactly limit VALID and k RATE_LIMITED', async () => {
    const { url, sql } = await freshReplicaDatabase('limits_replicas');
    const two = await startReplicas(url, 2);
    const limit = 40;
    const k = 25;
    const key = await create(two[0] as Replica, { ratelimit: { limit, duration: 3600 } });
    const counts = await burst(two, key, limit + k);
    console.log(`two replicas, limit ${limit}, k ${k}:`, counts);
    // The rule: at most limit, at least floor(0.9 × limit); one call per decision makes it exact.
    expect(counts.VALID).toBeLessThanOrEqual(limit);
    expect(counts.VALID).toBeGreaterThanOrEqual(Math.floor(0.9 * limit));
    expect(counts).toEqual({ VALID: limit, RATE_LIMITED: k });
    await sql.close();
  }, 60_000);

  it('the same burst spread over three replicas gets exactly limit VALID', async () => {
    const { url, sql } = await freshReplicaDatabase('limits_replicas');
    const three = await startReplicas(url, 3);
    const limit = 60;
    const k = 30;
    const key = await create(three[0] as Replica, { ratelimit: { limit, duration: 3600 } });
    const counts = await burst(three, key, limit + k);
    console.log(`three replicas, limit ${limit}, k ${k}:`, counts);
    expect(counts.VALID).toBeLessThanOrEqual(limit);
    expect(counts.VALID).toBeGreaterThanOrEqual(Math.floor(0.9 * limit));
    expect(counts).toEqual({ VALID: limit, RATE_LIMITED: k });
    await sql.close();
  }, 60_000);

  it('when all traffic reaches one of two replicas, that replica can use the whole limit', async () => {
    const { url, sql } = await freshReplicaDatabase('limits_replicas');
    const [a, b] = (await startReplicas(url, 2)) as [Replica, Replica];
    const limit = 30;
    const key = await create(b, { ratelimit: { limit, duration: 3600 } });
    expect(await burst([a], key, limit + 5)).toEqual({ VALID: limit, RATE_LIMITED: 5 });
    // And the other replica, which took none of them, admits none either.
    expect(await burst([b], key, 3)).toEqual({ RATE_LIMITED: 3 });
    await sql.close();
  }, 60_000);

  it("the operator's RATE_LIMIT holds across replicas too, and one replica alone can use it whole", async () => {
    const { url, sql } = await freshReplicaDatabase('limits_replicas');
    const [a, b] = (await startReplicas(url, 2, { RATE_LIMIT: '25/3600' })) as [Replica, Replica];
    const spread = await create(a, {});
    const counts = await burst([a, b], spread, 25 + 15);
    console.log('RATE_LIMIT 25/3600 over two replicas, k 15:', counts);
    expect(counts).toEqual({ VALID: 25, RATE_LIMITED: 15 });
    const alone = await create(a, {});
    expect(await burst([b], alone, 25 + 4)).toEqual({ VALID: 25, RATE_LIMITED: 4 });
    await sql.close();
  }, 60_000);

  it('concurrent spending over two replicas never passes the credits granted, and spends all of them', async () => {
    const { url, sql } = await freshReplicaDatabase('limits_replicas');
    const two = (await startReplicas(url, 2)) as [Replica, Replica];
    const granted = 50;
    const key = await create(two[0], { credits: { remaining: granted } });
    const counts = await burst(two, key, granted + 30);
    console.log(`credits over two replicas, granted ${granted}:`, counts);
    expect(counts.VALID).toBeLessThanOrEqual(granted);
    expect(counts.VALID).toBeGreaterThanOrEqual(Math.floor(0.9 * granted));
    expect(counts).toEqual({ VALID: granted, USAGE_EXCEEDED: 30 });
    const [{ remaining }] = await sql`SELECT remaining::int FROM key_credits WHERE lineage = ${key.key}`;
    expect(remaining).toBe(0);
    const info = await two[1].req('GET', `/apikeys/${key.key}/jwt`, {
      headers: await bearerFor(nextUser - 1),
    });
    expect(info.json.apikey.credits).toEqual({ remaining: 0 });
    await sql.close();
  }, 60_000);

  it('with a cost, concurrent takes over two replicas spend whole costs only, never more than granted', async () => {
    const { url, sql } = await freshReplicaDatabase('limits_replicas');
    const two = (await startReplicas(url, 2)) as [Replica, Replica];
    const key = await create(two[0], { credits: { remaining: 100 } });
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) => verify(two[i % 2] as Replica, key, { cost: 3 })),
    );
    const valid = answers.filter(({ json }) => json.code === 'VALID');
    expect(valid).toHaveLength(33);
    expect(answers.filter(({ json }) => json.code === 'USAGE_EXCEEDED')).toHaveLength(27);
    // Each VALID answer saw its own deduction: the remaining counts they report are all different.
    const reported = new Set(valid.map(({ json }) => json.credits.remaining));
    expect(reported.size).toBe(33);
    expect(Math.min(...reported)).toBe(1);
    await sql.close();
  }, 60_000);

  it("an update of a key's ratelimit or credits on one replica is applied by the other within a second", async () => {
    const { url, sql } = await freshReplicaDatabase('limits_replicas');
    // An hour of key cache: only the change notification can bring the new settings in time.
    const [a, b] = (await startReplicas(url, 2, { KEY_CACHE_SECONDS: '3600' })) as [Replica, Replica];
    const user = nextUser;
    const headers = await bearerFor(user);
    const key = await create(a, { ratelimit: { limit: 1000, duration: 60 } });
    expect((await verify(b, key)).json.ratelimit.limit).toBe(1000); // now cached on b
    const patch = (body: unknown) => a.req('PATCH', `/apikeys/${key.key}/jwt`, { headers, body });

    expect((await patch({ ratelimit: { limit: 2, duration: 60 } })).status).toBe(200);
    const limited = await within(1000, async () => (await verify(b, key)).json.ratelimit?.limit === 2);
    // The new limit starts afresh: the verification that saw it took 1 of its 2, whatever passed before.
    expect(await burst([b], key, 3)).toEqual({ VALID: 1, RATE_LIMITED: 2 });

    expect((await patch({ ratelimit: null, credits: { remaining: 3 } })).status).toBe(200);
    const credited = await within(1000, async () => (await verify(b, key)).json.credits !== undefined);
    const after = (await verify(b, key)).json;
    expect(after.ratelimit).toBeUndefined();
    expect(after.code).toBe('VALID');
    expect(after.credits.remaining).toBe(1); // 3, less the one that saw them and this one

    expect((await patch({ credits: null })).status).toBe(200);
    const freed = await within(1000, async () => {
      const answer = (await verify(b, key)).json;
      return answer.code === 'VALID' && answer.credits === undefined;
    });
    console.log(`applied on the other replica after ${[limited, credited, freed].map(Math.round)} ms`);
    await sql.close();
  }, 60_000);

  it("a replica's kill -9 loses no count: the other replica goes on from where it stopped", async () => {
    const { url, sql } = await freshReplicaDatabase('limits_replicas');
    const [victim, survivor] = (await startReplicas(url, 2)) as [Replica, Replica];
    const limited = await create(victim, { ratelimit: { limit: 10, duration: 3600 } });
    const credited = await create(victim, { credits: { remaining: 10 } });
    expect(await burst([victim], limited, 6)).toEqual({ VALID: 6 });
    expect(await burst([victim], credited, 6)).toEqual({ VALID: 6 });
    await victim.kill();
    expect(await burst([survivor], limited, 6)).toEqual({ VALID: 4, RATE_LIMITED: 2 });
    expect(await burst([survivor], credited, 6)).toEqual({ VALID: 4, USAGE_EXCEEDED: 2 });
    // And a restarted replica counts on the same rows.
    const [restarted] = (await startReplicas(url, 1)) as [Replica];
    expect(await burst([restarted], limited, 1)).toEqual({ RATE_LIMITED: 1 });
    await sql.close();
  }, 60_000);

  it('a crash of PostgreSQL itself starts rate-limit counts afresh (an unlogged table) and keeps credits', async () => {
    // Its own server: crashing the run's shared one would stop every other test's databases.
    const server = await startPostgres();
    try {
      const [one] = (await startReplicas(server.url, 1)) as [Replica];
      const limited = await create(one, { ratelimit: { limit: 5, duration: 3600 } });
      const credited = await create(one, { credits: { remaining: 5 } });
      expect(await burst([one], limited, 3)).toEqual({ VALID: 3 });
      expect(await burst([one], credited, 3)).toEqual({ VALID: 3 });
      server.stop('immediate');
      server.start();
      await within(10_000, async () => (await one.req('GET', '/health')).status === 200);
      // Documented: the counts are gone with the crash, so the whole limit is there again ...
      expect(await burst([one], limited, 6)).toEqual({ VALID: 5, RATE_LIMITED: 1 });
      // ... while the credits, committed to a logged table, are not.
      expect(await burst([one], credited, 3)).toEqual({ VALID: 2, USAGE_EXCEEDED: 1 });
    } finally {
      server.destroy();
    }
  }, 90_000);

  it('with PostgreSQL stopped, a cached key with a limit or credits answers 503, an unlimited one still verifies', async () => {
    // Its own server: stopping the run's shared one would stop every other test's databases.
    const server = await startPostgres();
    try {
      const [one] = (await startReplicas(server.url, 1, { KEY_CACHE_SECONDS: '3600' })) as [Replica];
      const unlimited = await create(one, {});
      const limited = await create(one, { ratelimit: { limit: 100, duration: 60 } });
      const credited = await create(one, { credits: { remaining: 100 } });
      for (const key of [unlimited, limited, credited])
        expect((await verify(one, key)).json.code).toBe('VALID');

      server.stop('immediate');
      // No database round trip for a key with neither: it verifies with the database gone.
      const free = await verify(one, unlimited);
      expect({ status: free.status, code: free.json.code }).toEqual({ status: 200, code: 'VALID' });
      const forward = await one.req('GET', '/forward-auth', {
        headers: { 'x-api-key': unlimited.key, 'x-api-secret': unlimited.secret },
      });
      expect(forward.status).toBe(200);
      for (const key of [limited, credited]) {
        const down = await verify(one, key);
        expect({ status: down.status, retryAfter: down.headers.get('retry-after'), json: down.json }).toEqual(
          {
            status: 503,
            retryAfter: '1',
            json: { result: 'error', error: expect.any(String) },
          },
        );
        const downForward = await one.req('GET', '/forward-auth', {
          headers: { 'x-api-key': key.key, 'x-api-secret': key.secret },
        });
        expect(downForward.status).toBe(503);
        expect(downForward.headers.get('retry-after')).toBe('1');
      }

      server.start();
      for (const key of [limited, credited]) {
        await within(10_000, async () => (await verify(one, key)).json.code === 'VALID');
      }
      expect(one.lines().filter((line) => line.status === 500 || line.msg === 'unexpected error')).toEqual(
        [],
      );
    } finally {
      server.destroy();
    }
  }, 90_000);
});
