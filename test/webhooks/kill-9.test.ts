// kill -9 between the acknowledgement and the delivery (SQLite, keygate as a real process from
// source): every acknowledged change's message arrives once keygate is started again. While the first
// process runs, the receiver's port takes connections and never answers, so no message is delivered
// (nor refused and put off by the retry schedule) before the kill: each is pending, or claimed for a
// lease that the restarted keygate waits out.
import { afterAll, describe, expect, it } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TEST_ENGINE } from '../support/postgres';
import { bearerFor, operatorBearer, startReplica, within } from '../support/replicas';

const scratch = mkdtempSync(join(tmpdir(), 'keygate-webhook-kill-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A listener that takes connections and never answers: deliveries to it hang until their timeout. */
function silentListener() {
  return Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
}

describe.skipIf(TEST_ENGINE !== 'sqlite')('webhooks across kill -9', () => {
  it('every acknowledged change sends its message after a restart', async () => {
    const database = join(scratch, 'keygate.db');
    const env = { WEBHOOK_ALLOW_PRIVATE: 'true' };
    const silent = silentListener();
    const { port } = silent;
    const first = await startReplica(database, env);
    const endpoint = await first.req('POST', '/admin/webhooks', {
      headers: await operatorBearer(),
      body: { url: `http://127.0.0.1:${port}/hooks`, events: ['key.created', 'key.deleted'] },
    });
    expect(endpoint.status).toBe(201);
    const acknowledged = new Set<string>();
    const created = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const response = await first.req('POST', '/apikeys/jwt', {
          headers: await bearerFor(i + 1),
          body: { name: 'crash', level: 1, expiresIn: 3600 },
        });
        expect(response.status).toBe(201);
        acknowledged.add(`key.created ${response.json.apikey.key}`);
        return { key: response.json.apikey.key as string, user: i + 1 };
      }),
    );
    for (const { key, user } of created.slice(0, 5)) {
      expect(
        (await first.req('DELETE', `/apikeys/${key}/jwt`, { headers: await bearerFor(user) })).status,
      ).toBe(204);
      acknowledged.add(`key.deleted ${key}`);
    }
    await first.kill();
    silent.stop(true);

    const arrived = new Set<string>();
    const receiver = Bun.serve({
      hostname: '127.0.0.1',
      port,
      async fetch(request) {
        const body = (await request.json()) as { type: string; data: { key: string } };
        arrived.add(`${body.type} ${body.data.key}`);
        return new Response(null, { status: 204 });
      },
    });
    const second = await startReplica(database, env);
    try {
      // A message the first process had claimed is due again once its lease (30 s) has passed.
      await within(60_000, async () => [...acknowledged].every((change) => arrived.has(change)));
      expect(arrived).toEqual(acknowledged);
    } finally {
      await second.stop();
      receiver.stop(true);
    }
  }, 120_000);
});
