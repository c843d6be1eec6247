// A leaked secret over two replicas on one PostgreSQL database: reported on one replica (the
// operator's /admin/leaks, LEAK_ACTION=disable), the key is refused by both within a second, however
// long the other replica would otherwise keep it cached.
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

describe.skipIf(TEST_ENGINE !== 'postgres')('a leaked secret over two replicas', () => {
  it('disabled on one replica: both refuse the key within a second', async () => {
    const { url, sql } = await freshReplicaDatabase('leaks');
    const [a, b] = (await startReplicas(url, 2, { KEY_CACHE_SECONDS: '3600' })) as [Replica, Replica];
    const created = await a.req('POST', '/apikeys/jwt', {
      headers: await bearerFor(42),
      body: { name: 'leaky', level: 3, expiresIn: 3600 },
    });
    const key = created.json.apikey as { key: string; secret: string };
    const verify = (replica: Replica) =>
      replica.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret } });
    // Cached on both, for an hour.
    expect((await verify(a)).json.code).toBe('VALID');
    expect((await verify(b)).json.code).toBe('VALID');

    const reported = await a.req('POST', '/admin/leaks', {
      headers: await operatorBearer(),
      body: { secrets: [key.secret], source: 'gitleaks' },
    });
    expect(reported.json).toEqual({
      result: 'success',
      found: [{ key: key.key, action: 'disabled' }],
      notFound: 0,
    });
    const ms = await within(1000, async () => {
      const codes = await Promise.all([verify(a), verify(b)]);
      return codes.every((answer) => answer.json.code === 'DISABLED');
    });
    expect(ms).toBeLessThan(1000);
    expect(a.lines('apikey.leaked')).toEqual([
      expect.objectContaining({ key: key.key, userId: 42, source: 'gitleaks', action: 'disabled' }),
    ]);
    const info = await b.req('GET', `/admin/apikeys/${key.key}`, { headers: await operatorBearer() });
    expect(info.json.apikey).toMatchObject({ enabled: false, leakSource: 'gitleaks' });
    await sql.close();
  });
});
