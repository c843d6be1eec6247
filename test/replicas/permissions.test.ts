// Permissions and allowedIps on replicas sharing one PostgreSQL database, over real sockets: a PATCH
// of a key's permissions or addresses on one replica is applied by the other within a second, even
// with an hour of key cache (the change notification evicts the cached key). Runs in
// `bun run test:postgres`; plain `bun test` (SQLite) skips it.
import { afterAll, describe, expect, it } from 'bun:test';
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

describe.skipIf(TEST_ENGINE !== 'postgres')('permissions on replicas of one database', () => {
  it("applies a PATCH of a key's permissions and allowedIps on the other replica within a second", async () => {
    const { url, sql } = await freshReplicaDatabase('permissions_replicas');
    const [a, b] = (await startReplicas(url, 2, { KEY_CACHE_SECONDS: '3600' })) as [Replica, Replica];
    const headers = await bearerFor(900);
    const created = await a.req('POST', '/apikeys/jwt', {
      headers,
      body: { name: 'p', level: 3, expiresIn: 3600, permissions: ['documents.read'] },
    });
    const key = created.json.apikey as { key: string; secret: string };
    const ask = async (body: Record<string, unknown>) =>
      (await b.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret, ...body } })).json
        .code;
    expect(await ask({ permissions: 'documents.read' })).toBe('VALID'); // now cached on b
    expect(await ask({ permissions: 'documents.write' })).toBe('INSUFFICIENT_PERMISSIONS');

    const patch = (body: unknown) => a.req('PATCH', `/apikeys/${key.key}/jwt`, { headers, body });
    expect((await patch({ permissions: ['documents.write'] })).status).toBe(200);
    const granted = await within(
      1000,
      async () => (await ask({ permissions: 'documents.write' })) === 'VALID',
    );
    expect(await ask({ permissions: 'documents.read' })).toBe('INSUFFICIENT_PERMISSIONS');

    expect((await patch({ allowedIps: ['203.0.113.0/24'] })).status).toBe(200);
    const fenced = await within(
      1000,
      async () => (await ask({ clientIp: '192.0.2.1' })) === 'IP_NOT_ALLOWED',
    );
    expect(await ask({ clientIp: '203.0.113.4' })).toBe('VALID');
    console.log(`applied on the other replica after ${[granted, fenced].map(Math.round)} ms`);
    await sql.close();
  }, 60_000);
});
