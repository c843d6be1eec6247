// Webhooks on replicas: each message reaches its endpoint once per deployment, not once per
// replica; a replica killed (kill -9) while it delivers leaves its message to the others once its lease
// ends; an endpoint created on one replica is used by the others' writes at once (NOTIFY).
// Runs in `bun run test:postgres`; plain `bun test` (SQLite) skips it.
import { afterAll, describe, expect, it } from 'bun:test';
import { TEST_ENGINE } from '../support/postgres';
import {
  bearerFor,
  freshReplicaDatabase,
  operatorBearer,
  type Replica,
  startReplica,
  startReplicas,
  stopReplicas,
  within,
} from '../support/replicas';
import { startReceiver, verified } from '../webhooks/support';

afterAll(stopReplicas);

const createBody = { name: 'replica', level: 3, expiresIn: 3600 };
const WEBHOOK_ENV = { WEBHOOK_ALLOW_PRIVATE: 'true' };

async function createEndpoint(replica: Replica, url: string, events: string[]) {
  const response = await replica.req('POST', '/admin/webhooks', {
    headers: await operatorBearer(),
    body: { url, events },
  });
  expect(response.status).toBe(201);
  return { id: response.json.endpoint.id as string, secret: response.json.secret as string };
}

describe.skipIf(TEST_ENGINE !== 'postgres')('webhooks on replicas', () => {
  it('two replicas send each message once, within a second of its commit', async () => {
    const { url, sql } = await freshReplicaDatabase('webhooks');
    const receiver = startReceiver();
    const arrived = new Map<string, number>();
    receiver.answer((entry) => {
      arrived.set(entry.json.data.key as string, performance.now());
      return { status: 204 };
    });
    const [a, b] = (await startReplicas(url, 2, WEBHOOK_ENV)) as [Replica, Replica];
    // Created on a: b's next write already knows of it (NOTIFY), or within a second.
    const endpoint = await createEndpoint(a, receiver.url, ['key.created']);
    await Bun.sleep(300);
    const acknowledged = new Map<string, number>();
    await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        const replica = i % 2 === 0 ? a : b;
        const response = await replica.req('POST', '/apikeys/jwt', {
          headers: await bearerFor(100 + i),
          body: createBody,
        });
        expect(response.status).toBe(201);
        acknowledged.set(response.json.apikey.key, performance.now());
      }),
    );
    await within(5000, async () => receiver.received.length >= 40);
    await Bun.sleep(1500); // a second pass of both senders: nothing sent twice
    const ids = receiver.received.map((entry) => entry.headers['webhook-id']);
    expect(ids.length).toBe(40);
    expect(new Set(ids).size).toBe(40);
    expect(new Set(receiver.received.map((entry) => entry.json.data.key))).toEqual(
      new Set(acknowledged.keys()),
    );
    for (const entry of receiver.received) expect(verified(endpoint.secret, entry)).toEqual(entry.json);
    const delays = [...acknowledged].map(([key, at]) => (arrived.get(key) as number) - at);
    expect(Math.max(...delays)).toBeLessThan(1000);
    receiver.stop();
    await sql.close();
  }, 60_000);

  it('a replica killed mid-delivery leaves its message to the other, which sends it with the same webhook-id', async () => {
    const { url, sql } = await freshReplicaDatabase('webhooks');
    const receiver = startReceiver();
    // The first request is never answered: the replica sending it is killed meanwhile.
    let first = true;
    receiver.answer(() => {
      if (first) {
        first = false;
        return 'hang';
      }
      return { status: 200 };
    });
    const a = await startReplica(url, WEBHOOK_ENV);
    const endpoint = await createEndpoint(a, receiver.url, ['key.created']);
    const created = await a.req('POST', '/apikeys/jwt', { headers: await bearerFor(9), body: createBody });
    expect(created.status).toBe(201);
    await within(3000, async () => receiver.received.length === 1);
    const b = (await startReplicas(url, 1, WEBHOOK_ENV))[0] as Replica;
    await a.kill();
    // The lease (30 s) passes, then b claims it.
    await within(45_000, async () => receiver.received.length === 2);
    const [hung, sent] = receiver.received;
    expect(sent?.headers['webhook-id']).toBe(hung?.headers['webhook-id']);
    expect(sent?.json.data.key).toBe(created.json.apikey.key);
    expect(verified(endpoint.secret, sent as NonNullable<typeof sent>)).toEqual(sent?.json);
    await within(2000, async () => {
      const messages = await b.req('GET', `/admin/webhooks/${endpoint.id}/messages`, {
        headers: await operatorBearer(),
      });
      return messages.json.messages[0]?.status === 'delivered';
    });
    receiver.stop();
    await sql.close();
  }, 90_000);
});
