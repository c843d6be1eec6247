// The operator's credential on the /admin routes: a token whose scope holds JWT_ADMIN_SCOPE, any
// `sub`. No credential is 401; a token without the scope, a bad token or an API key is 403; checked
// before the path's format. On the /jwt routes such a token is only a token for its `sub`.
import { afterEach, beforeEach, describe, expect, it } from 'bun:test';
import { SignJWT } from 'jose';
import { JWT_SECRET, type TestKeygate, testKeygate } from '../support/keygate';

let k: TestKeygate;
beforeEach(async () => {
  k = await testKeygate();
});
afterEach(() => k.close());

const sign = (claims: { sub: string; scope?: string }) => k.keygate.jwt.sign({ ...claims, ttlSeconds: 3600 });
const bearer = async (claims: { sub: string; scope?: string }) => ({
  authorization: `Bearer ${await sign(claims)}`,
});

describe('GET /admin/apikeys/:id', () => {
  it('shows any user’s key at any level to the operator', async () => {
    const key = await k.createKey(42, { name: 'top', level: 8 });
    const response = await k.req('GET', `/admin/apikeys/${key.key}`, { headers: await k.operator() });
    expect(response.status).toBe(200);
    expect(response.json).toEqual({
      result: 'success',
      apikey: {
        key: key.key,
        name: 'top',
        level: 8,
        userId: 42,
        createdAt: new Date(k.time.now).toISOString(),
        expiresAt: key.expiresAt,
        enabled: true,
        lastUsedAt: null,
      },
    });
  });

  it('answers 404 for an unknown key and an expired one, 400 for an id not of the key format', async () => {
    const headers = await k.operator();
    const expiring = await k.createKey(42, { expiresIn: 1 });
    k.time.now += 1000;
    const unknown = `kg_${'A'.repeat(22)}`;
    expect((await k.req('GET', `/admin/apikeys/${unknown}`, { headers })).status).toBe(404);
    expect((await k.req('GET', `/admin/apikeys/${expiring.key}`, { headers })).status).toBe(404);
    const malformed = await k.req('GET', '/admin/apikeys/not-a-key', { headers });
    expect(malformed.status).toBe(400);
    expect(malformed.json.result).toBe('error');
  });
});

describe('who may use the operator’s routes', () => {
  type Case = [name: string, headers: () => Promise<Record<string, string>>, status: number];
  const cases: Case[] = [
    ['the admin scope alone', () => bearer({ sub: 'ops', scope: 'keygate:admin' }), 200],
    ['the admin scope among others', () => bearer({ sub: 'ops', scope: 'openid keygate:admin api' }), 200],
    ['a numeric sub with the admin scope', () => bearer({ sub: '42', scope: 'keygate:admin' }), 200],
    ['a token without a scope', () => k.bearer(42), 403],
    ['another scope', () => bearer({ sub: 'ops', scope: 'api' }), 403],
    ['the scope in another case', () => bearer({ sub: 'ops', scope: 'Keygate:Admin' }), 403],
    ['a scope that only begins with it', () => bearer({ sub: 'ops', scope: 'keygate:admin2' }), 403],
    ['the scopes joined by a comma', () => bearer({ sub: 'ops', scope: 'api,keygate:admin' }), 403],
    [
      'a token signed with another secret',
      async () => {
        const token = await sign({ sub: 'ops', scope: 'keygate:admin' });
        return { authorization: `Bearer ${token.slice(0, -2)}AA` };
      },
      403,
    ],
    ['a malformed Authorization header', async () => ({ authorization: 'Bearer a b' }), 403],
    [
      'an API key and secret (Basic)',
      async () => {
        const key = await k.createKey(42, { level: 8 });
        return k.basic(key.key, key.secret);
      },
      401,
    ],
    [
      'an API key and secret (X-API-Key)',
      async () => {
        const key = await k.createKey(42, { level: 8 });
        return { 'x-api-key': key.key, 'x-api-secret': key.secret };
      },
      401,
    ],
    ['no credential', async () => ({}), 401],
  ];

  it.each(cases)('%s → %d', async (_, headers, status) => {
    const key = await k.createKey(7, { level: 1 });
    const response = await k.req('GET', `/admin/apikeys/${key.key}`, { headers: await headers() });
    expect(response.status).toBe(status);
    if (status === 200) return;
    expect(response.json).toEqual({ result: 'error', error: expect.any(String) });
    expect(response.headers.get('content-type')).toBe('application/json');
    if (status === 401) expect(response.headers.get('www-authenticate')).toBe('Bearer realm="keygate"');
    else expect(response.headers.get('www-authenticate')).toBeNull();
  });

  it.each([
    ['a JSON number', 42],
    ['an empty string', ''],
  ])('refuses a sub that is %s: every audit line must name its operator (403)', async (_, sub) => {
    const token = await new SignJWT({ sub, scope: 'keygate:admin' } as Record<string, unknown>)
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuedAt(Math.floor(k.time.now / 1000))
      .setExpirationTime(Math.floor(k.time.now / 1000) + 600)
      .sign(new TextEncoder().encode(JWT_SECRET));
    const response = await k.req('GET', '/admin/users/7/apikeys', {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(response.status).toBe(403);
    expect(response.json.error).toContain('sub');
  });

  it('checks the credential before the path: no credential and a bad id is 401, no scope 403', async () => {
    expect((await k.req('GET', '/admin/apikeys/nope')).status).toBe(401);
    expect((await k.req('GET', '/admin/apikeys/nope', { headers: await k.bearer(42) })).status).toBe(403);
  });

  it('takes the scope JWT_ADMIN_SCOPE names, and no longer the default', async () => {
    await k.close();
    k = await testKeygate({ JWT_ADMIN_SCOPE: 'ops/keys.admin' });
    const key = await k.createKey(7);
    const path = `/admin/apikeys/${key.key}`;
    expect(
      (await k.req('GET', path, { headers: await bearer({ sub: 'ops', scope: 'ops/keys.admin' }) })).status,
    ).toBe(200);
    expect(
      (await k.req('GET', path, { headers: await bearer({ sub: 'ops', scope: 'keygate:admin' }) })).status,
    ).toBe(403);
  });
});

describe('an operator’s token on the /jwt routes', () => {
  it('is refused when its sub is no user id', async () => {
    const response = await k.req('GET', '/apikeys/jwt', { headers: await k.operator('ops') });
    expect(response.status).toBe(403);
  });

  it('is a token of the user its sub names, and sees that user’s keys only', async () => {
    const own = await k.createKey(42);
    await k.createKey(7);
    const response = await k.req('GET', '/apikeys/jwt', { headers: await k.operator('42') });
    expect(response.status).toBe(200);
    expect(response.json.apikeys.map((item: { key: string }) => item.key)).toEqual([own.key]);
  });
});
