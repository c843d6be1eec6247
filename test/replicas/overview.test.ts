// The operator's overview over two replicas of one PostgreSQL database: keys created on either are
// counted once each (each create's transaction adds to its connection's shard), and the
// verifications each replica counts in memory add up once flushed (USAGE_FLUSH_SECONDS), tokens'
// too, as do the VALID counts that rank the keys.
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

const createBody = { name: 'overview', level: 3, expiresIn: 3600 };

describe.skipIf(TEST_ENGINE !== 'postgres')('the overview over two replicas', () => {
  it('adds up the keys created and the verifications counted on both', async () => {
    const { url, sql } = await freshReplicaDatabase('overview_replicas');
    const [a, b] = (await startReplicas(url, 2, { USAGE_FLUSH_SECONDS: '1' })) as [Replica, Replica];
    const created = await Promise.all(
      [a, b, a, b, b].map(async (replica, i) => {
        const response = await replica.req('POST', '/apikeys/jwt', {
          headers: await bearerFor(10 + i),
          body: createBody,
        });
        expect(response.status).toBe(201);
        return response.json.apikey as { key: string; secret: string; userId: number };
      }),
    );
    const [first, second] = created as [(typeof created)[0], (typeof created)[0]];
    const verify = (replica: Replica, body: Record<string, unknown>) =>
      replica.req('POST', '/apikeys/verify', { body });
    for (let i = 0; i < 3; i++) await verify(a, { key: first.key, secret: first.secret });
    for (let i = 0; i < 2; i++) await verify(b, { key: first.key, secret: first.secret });
    await verify(b, { key: second.key, secret: second.secret });
    const token = ((await bearerFor(99)).authorization as string).slice('Bearer '.length);
    await verify(a, { token });
    await verify(b, { token: `${token}x` });
    const overviewOn = async (replica: Replica) =>
      (await replica.req('GET', '/admin/overview', { headers: await operatorBearer() })).json;
    // Each asks after writing its own counts; the other's are there within the flush interval.
    await within(5000, async () => {
      const [onA, onB] = [await overviewOn(a), await overviewOn(b)];
      return (
        onA.verifications.day.VALID === 7 &&
        JSON.stringify(onA.verifications) === JSON.stringify(onB.verifications)
      );
    });
    const overview = await overviewOn(b);
    expect(overview.keys).toBe(5);
    expect(overview.created).toEqual({ day: 5, month: 5 });
    expect(overview.verifications.day).toEqual({ VALID: 7, INVALID_TOKEN: 1 });
    expect(overview.topKeys).toEqual([
      { key: first.key, userId: first.userId, name: 'overview', valid: 5 },
      { key: second.key, userId: second.userId, name: 'overview', valid: 1 },
    ]);
    // One row per hour and shard (a connection's backend pid modulo 8): whichever rows, they sum to 5.
    const [{ total }] = await sql`SELECT sum(count)::int AS total FROM key_creations`;
    expect(total).toBe(5);
    await sql.close();
  }, 60_000);
});
