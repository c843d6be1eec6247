// A user's policy over two replicas on one PostgreSQL database: its rate limit is one window and its
// credits one pool for all the user's keys, whichever replica a verification reaches. A burst split
// over two keys and two replicas gets exactly the policy's limit; concurrent spending of two keys on
// two replicas never takes more than the pool holds, and takes all of it.
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
} from '../support/replicas';

afterAll(stopReplicas);

async function twoReplicas() {
  const { url } = await freshReplicaDatabase('user_policies');
  return (await startReplicas(url, 2)) as [Replica, Replica];
}

/**
 * Over `count` replicas, user `userId` with the policy's limit `limit` per 2 s and two keys: `spent`,
 * whose own limit of 1 is used up, and `free`, with no limit of its own. `windows` bursts of
 * 3 × `limit` verifications, the keys interleaved (free, spent, free, …) and spread over the replicas,
 * each pair of verifications to the next replica, each burst 2.3 s after the last one so that it meets an empty window: the VALID answers of each.
 */
async function interleavedBursts(count: number, userId: number, limit: number, windows: number) {
  const { url } = await freshReplicaDatabase('user_policies');
  const replicas = await startReplicas(url, count);
  const a = replicas[0] as Replica;
  const [spent, free] = await userWithTwoKeys(a, userId, { ratelimit: { limit, duration: 2 } });
  const limited = await a.req('PATCH', `/apikeys/${spent.key}/jwt`, {
    headers: await bearerFor(userId),
    body: { ratelimit: { limit: 1, duration: 3600 } },
  });
  expect(limited.status).toBe(200);
  expect((await verify(a, spent)).json.code).toBe('VALID');
  await Bun.sleep(2300);
  const valid: number[] = [];
  for (let window = 0; window < windows; window++) {
    const answers = await Promise.all(
      Array.from({ length: 3 * limit }, (_, i) =>
        verify(replicas[Math.floor(i / 2) % replicas.length] as Replica, i % 2 === 0 ? free : spent),
      ),
    );
    valid.push(answers.filter((answer) => answer.json.code === 'VALID').length);
    // The spent key's own limit refuses it every time.
    expect(answers.filter((answer, i) => i % 2 === 1 && answer.json.code === 'VALID')).toHaveLength(0);
    await Bun.sleep(2300);
  }
  return valid;
}

type Key = { key: string; secret: string };

/** User `userId` with `policy` (put on replica `a`) and two keys of their own. */
async function userWithTwoKeys(a: Replica, userId: number, policy: Record<string, unknown>) {
  const put = await a.req('PUT', `/admin/users/${userId}/policy`, {
    headers: await operatorBearer(),
    body: { ratelimit: null, credits: null, maxKeys: null, maxLevel: null, ...policy },
  });
  expect(put.status).toBe(200);
  const keys: Key[] = [];
  for (const name of ['one', 'two']) {
    const created = await a.req('POST', '/apikeys/jwt', {
      headers: await bearerFor(userId),
      body: { name, level: 1, expiresIn: 3600 },
    });
    expect(created.status).toBe(201);
    keys.push(created.json.apikey);
  }
  return keys as [Key, Key];
}

const verify = (replica: Replica, key: Key, cost = 1) =>
  replica.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret, cost } });

describe.skipIf(TEST_ENGINE !== 'postgres')('a user’s policy over two replicas', () => {
  it('gives a burst split over two keys and two replicas exactly the policy’s limit', async () => {
    const [a, b] = await twoReplicas();
    const limit = 40;
    const extra = 24;
    const [one, two] = await userWithTwoKeys(a, 51, { ratelimit: { limit, duration: 3600 } });
    // Every (replica, key) pair in turn, all in flight at once.
    const pairs: Array<[Replica, Key]> = [
      [a, one],
      [b, two],
      [b, one],
      [a, two],
    ];
    const answers = await Promise.all(
      Array.from({ length: limit + extra }, (_, i) => {
        const [replica, key] = pairs[i % pairs.length] as [Replica, Key];
        return verify(replica, key);
      }),
    );
    const codes = answers.map((answer) => answer.json.code);
    expect(codes.filter((code) => code === 'VALID')).toHaveLength(limit);
    expect(codes.filter((code) => code === 'RATE_LIMITED')).toHaveLength(extra);
    const refused = answers.find((answer) => answer.json.code === 'RATE_LIMITED');
    expect(refused?.json.ratelimit).toMatchObject({ limit, remaining: 0, scope: 'user' });
  });

  it('holds the shared limit exactly in every window when a key refused by its own limit is interleaved, over two replicas', async () => {
    const limit = 20;
    const valid = await interleavedBursts(2, 53, limit, 5);
    console.log(`two replicas, user limit ${limit}, VALID per window:`, valid);
    for (const count of valid) {
      expect(count).toBeLessThanOrEqual(limit);
      expect(count).toBeGreaterThanOrEqual(Math.floor(0.9 * limit));
    }
  }, 60_000);

  it('holds the shared limit exactly in every window when a key refused by its own limit is interleaved, over three replicas', async () => {
    const limit = 30;
    const valid = await interleavedBursts(3, 54, limit, 5);
    console.log(`three replicas, user limit ${limit}, VALID per window:`, valid);
    for (const count of valid) {
      expect(count).toBeLessThanOrEqual(limit);
      expect(count).toBeGreaterThanOrEqual(Math.floor(0.9 * limit));
    }
  }, 60_000);

  it('never takes more from the shared pool than it holds, and takes all of it, over two keys and two replicas', async () => {
    const [a, b] = await twoReplicas();
    const pool = 60;
    const [one, two] = await userWithTwoKeys(a, 52, { credits: { remaining: pool } });
    const costs = [1, 2, 3];
    const sent = Array.from({ length: 60 }, (_, i) => ({
      replica: i % 2 === 0 ? a : b,
      key: i % 3 === 0 ? one : two,
      cost: costs[i % costs.length] as number,
    }));
    const answers = await Promise.all(sent.map(({ replica, key, cost }) => verify(replica, key, cost)));
    const taken = answers.reduce(
      (sum, answer, i) => sum + (answer.json.code === 'VALID' ? (sent[i]?.cost ?? 0) : 0),
      0,
    );
    // 120 asked for against 60: the VALID answers took at most the pool, and a refusal came only
    // when less than its cost was left, so at most 2 (the largest cost − 1) remain unspent.
    expect(taken).toBeLessThanOrEqual(pool);
    expect(taken).toBeGreaterThanOrEqual(pool - 2);
    const policy = await b.req('GET', '/admin/users/52/policy', { headers: await operatorBearer() });
    expect(policy.json.policy.credits.remaining).toBe(pool - taken);
  });
});
