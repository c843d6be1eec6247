// Forward-auth through app.handle: allow (200 + identity headers), 401, 403, 400 for the query, any
// method and path below /forward-auth, the body never read, and keys refused at once after a delete.
import { afterEach, beforeEach, describe, expect, it } from 'bun:test';
import { type TestKeygate, testKeygate } from '../support/keygate';

let k: TestKeygate;
beforeEach(async () => {
  k = await testKeygate();
});
afterEach(() => k.close());

const xApiKey = (key: string, secret: string) => ({ 'x-api-key': key, 'x-api-secret': secret });

describe('forward-auth allows', () => {
  it.each([
    ['Basic', 'basic'],
    ['X-API-Key and X-API-Secret', 'headers'],
  ] as const)('a valid key given as %s: 200, identity headers, no-store, the principal', async (_, form) => {
    const key = await k.createKey(42, { level: 3, name: 'ci' });
    const headers = form === 'basic' ? k.basic(key.key, key.secret) : xApiKey(key.key, key.secret);
    const response = await k.req('GET', '/forward-auth', { headers });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/json');
    expect(response.headers.get('cache-control')).toBe('no-store');
    expect(response.headers.get('x-keygate-user-id')).toBe('42');
    expect(response.headers.get('x-keygate-level')).toBe('3');
    expect(response.headers.get('x-keygate-auth')).toBe('key');
    expect(response.headers.get('x-keygate-key')).toBe(key.key);
    expect(response.headers.get('x-keygate-expires-at')).toBe(key.expiresAt);
    expect(response.json).toEqual({
      result: 'success',
      principal: { type: 'key', key: key.key, userId: 42, level: 3, name: 'ci', expiresAt: key.expiresAt },
    });
    expect(response.text).toBe(JSON.stringify(response.json));
  });

  it('a valid token: 200, X-Keygate-Auth jwt, no X-Keygate-Key, exp as ISO ms', async () => {
    const token = await k.token(7, { level: 5, ttlSeconds: 120 });
    const response = await k.req('GET', '/forward-auth', { headers: { authorization: `Bearer ${token}` } });
    const expiresAt = new Date(k.time.now + 120_000).toISOString();
    expect(response.status).toBe(200);
    expect(response.headers.get('cache-control')).toBe('no-store');
    expect(response.headers.get('x-keygate-user-id')).toBe('7');
    expect(response.headers.get('x-keygate-level')).toBe('5');
    expect(response.headers.get('x-keygate-auth')).toBe('jwt');
    expect(response.headers.has('x-keygate-key')).toBe(false);
    expect(response.headers.get('x-keygate-expires-at')).toBe(expiresAt);
    expect(response.json).toEqual({
      result: 'success',
      principal: { type: 'jwt', userId: 7, level: 5, expiresAt },
    });
    expect(response.text).toBe(JSON.stringify(response.json));
  });

  it.each(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'PROPFIND', 'M-SEARCH'])(
    'any method: %s',
    async (method) => {
      const key = await k.createKey(1);
      const response = await k.req(method, '/forward-auth', { headers: k.basic(key.key, key.secret) });
      expect(response.status).toBe(200);
      expect(response.json.principal.key).toBe(key.key);
    },
  );

  it.each(['/forward-auth/', '/forward-auth/app', '/forward-auth/a/b/c.json', '/forward-auth/x?minLevel=2'])(
    'any path below it: %s',
    async (path) => {
      const key = await k.createKey(1, { level: 3 });
      const response = await k.req('GET', path, { headers: k.basic(key.key, key.secret) });
      expect(response.status).toBe(200);
    },
  );

  it('never reads the body: invalid JSON with a JSON Content-Type is still allowed', async () => {
    const key = await k.createKey(1);
    const response = await k.req('POST', '/forward-auth', {
      headers: { ...k.basic(key.key, key.secret), 'content-type': 'application/json' },
      body: '{not json',
    });
    expect(response.status).toBe(200);
  });

  it.each([
    ['another parameter', 'other=1', 200],
    ['a query without a value', 'x', 200],
    ['a differently spelt name', 'minlevel=7', 200],
    ['the client query beside minLevel', 'page=2&minLevel=3&sort=name', 200],
    ['minLevel twice: the highest counts', 'minLevel=1&minLevel=4', 403],
  ])(
    'ignores query parameters other than minLevel (a proxy forwards the client query): %s',
    async (_, query, status) => {
      const key = await k.createKey(1, { level: 3 });
      const response = await k.req('GET', `/forward-auth/app/path?${query}`, {
        headers: k.basic(key.key, key.secret),
      });
      expect(response.status).toBe(status);
    },
  );

  it.each([
    ['the header alone', '', '4', 403],
    ['the header below the query', 'minLevel=4', '1', 403],
    ['the query below the header', 'minLevel=1', '4', 403],
    ['both at the level', 'minLevel=3', '3', 200],
  ])('requires the highest of the query and X-Keygate-Min-Level: %s', async (_, query, header, status) => {
    const key = await k.createKey(1, { level: 3 });
    const response = await k.req('GET', `/forward-auth?${query}`, {
      headers: { ...k.basic(key.key, key.secret), 'x-keygate-min-level': header },
    });
    expect(response.status).toBe(status);
  });

  it('minLevel at or below the credential level', async () => {
    const key = await k.createKey(1, { level: 3 });
    for (const minLevel of ['0', '3']) {
      const response = await k.req('GET', `/forward-auth?minLevel=${minLevel}`, {
        headers: k.basic(key.key, key.secret),
      });
      expect(response.status).toBe(200);
    }
  });
});

describe('forward-auth denies', () => {
  it.each([
    ['no credential headers', {}],
    ['another Authorization scheme', { authorization: 'Digest username="x"' }],
  ])('401 with WWW-Authenticate naming Bearer and Basic: %s', async (_, headers) => {
    for (const method of ['GET', 'POST', 'PROPFIND']) {
      const response = await k.req(method, '/forward-auth?minLevel=99', { headers });
      expect(response.status).toBe(401);
      const challenge = response.headers.get('www-authenticate') ?? '';
      expect(challenge).toContain('Bearer');
      expect(challenge).toContain('Basic');
      expect(response.headers.get('content-type')).toBe('application/json');
      expect(response.json).toEqual({ result: 'error', error: expect.any(String) });
      expect(response.headers.has('x-keygate-user-id')).toBe(false);
    }
  });

  it('403 for every invalid or expired credential, with no identity headers', async () => {
    const key = await k.createKey(1, { expiresIn: 60 });
    const expiring = await k.token(1, { ttlSeconds: 30 });
    const cases: Array<[string, Record<string, string>]> = [
      ['wrong secret', k.basic(key.key, `${key.secret}x`)],
      ['unknown key', k.basic('kg_0000000000000000000000', key.secret)],
      ['key not of the kg_ format', k.basic('nope', key.secret)],
      ['X-API-Key without X-API-Secret', { 'x-api-key': key.key }],
      ['malformed Basic', { authorization: 'Basic !!!' }],
      ['malformed Bearer', { authorization: 'Bearer a b' }],
      ['a token that is not a JWT', { authorization: 'Bearer not-a-jwt' }],
      ['a token signed with another secret', { authorization: `Bearer ${await otherSecretToken()}` }],
    ];
    for (const [label, headers] of cases) {
      const response = await k.req('GET', '/forward-auth', { headers });
      expect([label, response.status]).toEqual([label, 403]);
      expect(response.json.result).toBe('error');
      expect(response.headers.has('x-keygate-user-id')).toBe(false);
    }
    k.time.now += 60_000;
    for (const headers of [k.basic(key.key, key.secret), { authorization: `Bearer ${expiring}` }]) {
      expect((await k.req('GET', '/forward-auth', { headers })).status).toBe(403);
    }
  });

  it('403 when the level is below minLevel, for keys and tokens', async () => {
    const key = await k.createKey(1, { level: 3 });
    const token = await k.token(1, { level: 3 });
    for (const headers of [k.basic(key.key, key.secret), { authorization: `Bearer ${token}` }]) {
      const response = await k.req('GET', '/forward-auth?minLevel=4', { headers });
      expect(response.status).toBe(403);
      expect(response.json.error).toContain('level 3');
    }
  });

  it.each([
    'minLevel=9',
    'minLevel=-1',
    'minLevel=1.5',
    'minLevel=',
    'minLevel=03',
    'minLevel=%33x',
    'minLevel=1&minLevel=9',
    'next=%2Fhome&minLevel=x',
  ])('400 for the query ?%s once the credential is valid', async (query) => {
    const key = await k.createKey(1, { level: 8 });
    const response = await k.req('GET', `/forward-auth?${query}`, { headers: k.basic(key.key, key.secret) });
    expect(response.status).toBe(400);
    expect(response.json).toEqual({ result: 'error', error: expect.stringContaining('minLevel') });
  });

  it.each(['9', '-1', '', 'high'])('400 for X-Keygate-Min-Level: %p', async (value) => {
    const key = await k.createKey(1, { level: 8 });
    const response = await k.req('GET', '/forward-auth', {
      headers: { ...k.basic(key.key, key.secret), 'x-keygate-min-level': value },
    });
    expect(response.status).toBe(400);
    expect(response.json).toEqual({ result: 'error', error: expect.stringContaining('minLevel') });
  });

  it('refuses a deleted key on the very next request, though it was cached', async () => {
    const key = await k.createKey(1);
    const headers = k.basic(key.key, key.secret);
    expect((await k.req('GET', '/forward-auth', { headers })).status).toBe(200);
    expect((await k.req('DELETE', `/apikeys/${key.key}/jwt`, { headers: await k.bearer(1) })).status).toBe(
      204,
    );
    expect((await k.req('GET', '/forward-auth', { headers })).status).toBe(403);
  });

  it('is not there outside /forward-auth', async () => {
    const key = await k.createKey(1);
    for (const path of ['/forward-authx', '/forward', '/apikeys/forward-auth']) {
      expect((await k.req('GET', path, { headers: k.basic(key.key, key.secret) })).status).toBe(404);
    }
  });
});

describe('forward-auth under BASE_PATH', () => {
  it('answers only below the prefix', async () => {
    const based = await testKeygate({ BASE_PATH: '/auth' });
    try {
      const key = await based.createKey(1);
      const headers = based.basic(key.key, key.secret);
      expect((await based.req('GET', '/forward-auth/x', { headers })).status).toBe(200);
      const outside = await based.keygate.handle(new Request('http://localhost/forward-auth', { headers }));
      expect(outside.status).toBe(404);
    } finally {
      await based.close();
    }
  });
});

async function otherSecretToken(): Promise<string> {
  const { createJwtAuthority } = await import('../../src/auth/jwt');
  const other = createJwtAuthority({
    secret: 'another-secret-that-is-32-bytes-long!!',
    clock: () => k.time.now,
  });
  return other.sign({ sub: 1, ttlSeconds: 60 });
}
