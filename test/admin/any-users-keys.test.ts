// The operator's key routes: any user's keys, every level, through the same rules as the owner's
// routes (bodies, paging, 404 for expired or unknown keys, the cap), audited as admin:<sub>. Every
// route answers only the operator: a user's token or key is 403, no credential 401.
import { afterEach, beforeEach, describe, expect, it } from 'bun:test';
import { type TestKeygate, testKeygate } from '../support/keygate';
import { rawQuery } from '../support/raw-query';

let k: TestKeygate;
beforeEach(async () => {
  k = await testKeygate({ MAX_KEYS_PER_USER: '3' });
});
afterEach(() => k.close());

const UNKNOWN = `kg_${'Z'.repeat(22)}`;

type Route = {
  method: string;
  /** The path, given a key of user 42 to act on. */
  path: (key: string) => string;
  body?: unknown;
  /** The operator's success. */
  status: number;
};
const ROUTES: Record<string, Route> = {
  list: { method: 'GET', path: () => '/admin/users/42/apikeys', status: 200 },
  create: {
    method: 'POST',
    path: () => '/admin/users/42/apikeys',
    body: { name: 'ops', level: 8, expiresIn: 60 },
    status: 201,
  },
  revokeAll: { method: 'DELETE', path: () => '/admin/users/42/apikeys', status: 200 },
  userUsage: { method: 'GET', path: () => '/admin/users/42/usage', status: 200 },
  get: { method: 'GET', path: (key) => `/admin/apikeys/${key}`, status: 200 },
  update: { method: 'PATCH', path: (key) => `/admin/apikeys/${key}`, body: { enabled: false }, status: 200 },
  delete: { method: 'DELETE', path: (key) => `/admin/apikeys/${key}`, status: 204 },
  keyUsage: { method: 'GET', path: (key) => `/admin/apikeys/${key}/usage`, status: 200 },
};

const CREDENTIALS: Array<[string, () => Promise<Record<string, string>>, (route: Route) => number]> = [
  ['the operator', () => k.operator(), (route) => route.status],
  ['a user’s token (level 8)', () => k.bearer(42, 8), () => 403],
  [
    'a user’s key (level 8)',
    async () => {
      const key = await k.createKey(42, { level: 8, name: 'caller' });
      return k.basic(key.key, key.secret);
    },
    // Another scheme's credential, as none of the admin scheme.
    () => 401,
  ],
  ['no credential', async () => ({}), () => 401],
];

describe.each(Object.entries(ROUTES))('%s', (_, route) => {
  it.each(CREDENTIALS)('with %s', async (_, headers, status) => {
    const target = await k.createKey(42, { level: 8 });
    const response = await k.req(route.method, route.path(target.key), {
      headers: await headers(),
      body: route.body,
    });
    expect(response.status).toBe(status(route));
    if (response.status >= 400) expect(response.json).toEqual({ result: 'error', error: expect.any(String) });
  });

  it('checks the credential before the path and the body', async () => {
    const path = route.path('nope').replace('/42/', '/x/');
    expect((await k.req(route.method, path, { body: '{' })).status).toBe(401);
    const refused = await k.req(route.method, path, { headers: await k.bearer(42), body: '{' });
    expect(refused.status).toBe(403);
    const malformed = await k.req(route.method, path, { headers: await k.operator(), body: route.body });
    expect(malformed.status).toBe(400);
  });
});

describe('GET /admin/users/:userId/apikeys', () => {
  it('lists the user’s live keys at every level, newest first, in pages', async () => {
    const created: string[] = [];
    for (const level of [0, 8, 3]) {
      k.time.now += 1;
      created.unshift((await k.createKey(42, { level })).key);
    }
    await k.createKey(7);
    const headers = await k.operator();
    const first = await k.req('GET', '/admin/users/42/apikeys?limit=2', { headers });
    expect(first.status).toBe(200);
    expect(first.json.apikeys.map((item: { key: string }) => item.key)).toEqual(created.slice(0, 2));
    const rest = await k.req('GET', `/admin/users/42/apikeys?cursor=${first.json.nextCursor}`, { headers });
    expect(rest.json).toMatchObject({ result: 'success', nextCursor: null });
    expect(rest.json.apikeys.map((item: { key: string }) => item.key)).toEqual(created.slice(2));
  });

  it.each([['limit=0'], ['limit=101'], ['cursor=nope'], ['other=1']])(
    'answers 400 for ?%s',
    async (query) => {
      const response = await k.req('GET', `/admin/users/42/apikeys?${query}`, {
        headers: await k.operator(),
      });
      expect(response.status).toBe(400);
    },
  );

  it.each([['-1'], ['01'], ['1.5'], ['99999999999999999'], ['abc']])(
    'answers 400 for the user id %p',
    async (userId) => {
      const response = await k.req('GET', `/admin/users/${userId}/apikeys`, { headers: await k.operator() });
      expect(response.status).toBe(400);
    },
  );
});

describe('POST /admin/users/:userId/apikeys', () => {
  it('creates a key for the user at any level with its settings, audited as the operator', async () => {
    const body = {
      name: 'plan',
      level: 8,
      expiresIn: 600,
      meta: { plan: 'gold' },
      enabled: false,
      ratelimit: { limit: 10, duration: 60 },
      credits: { remaining: 5, refill: { amount: 5, interval: 3600 } },
    };
    const response = await k.req('POST', '/admin/users/42/apikeys', {
      headers: await k.operator('ops'),
      body,
    });
    expect(response.status).toBe(201);
    expect(response.headers.get('cache-control')).toBe('no-store');
    const { apikey } = response.json;
    expect(apikey).toMatchObject({
      userId: 42,
      level: 8,
      name: 'plan',
      meta: { plan: 'gold' },
      enabled: false,
    });
    expect(apikey.secret).toStartWith('kgs_');
    const owner = await k.req('GET', `/apikeys/${apikey.key}/jwt`, { headers: await k.bearer(42) });
    expect(owner.json.apikey).toMatchObject({ credits: { remaining: 5 }, ratelimit: body.ratelimit });
    expect(k.logLines('apikey.created').at(-1)).toMatchObject({
      key: apikey.key,
      userId: 42,
      by: 'admin:ops',
    });
    expect(JSON.stringify(k.logLines())).not.toContain(apikey.secret);
  });

  it.each([
    [{ name: 'x', level: 9, expiresIn: 60 }],
    [{ name: 'x', level: 1 }],
    [{ name: 'x', level: 1, expiresIn: 60, other: 1 }],
    [{ name: '', level: 1, expiresIn: 60 }],
    [{ name: 'x', level: 1, expiresIn: 60, meta: [] }],
  ])('answers 400 for %p', async (body) => {
    const response = await k.req('POST', '/admin/users/42/apikeys', { headers: await k.operator(), body });
    expect(response.status).toBe(400);
    expect(response.json.result).toBe('error');
  });

  it('answers 409 at the user’s cap, as the owner’s create does', async () => {
    for (let i = 0; i < 3; i++) await k.createKey(42);
    const response = await k.req('POST', '/admin/users/42/apikeys', {
      headers: await k.operator(),
      body: { name: 'one more', level: 1, expiresIn: 60 },
    });
    expect(response.status).toBe(409);
  });
});

describe('PATCH and DELETE /admin/apikeys/:id', () => {
  it('updates any user’s key at any level, and the owner sees it', async () => {
    const key = await k.createKey(42, { level: 2 });
    const response = await k.req('PATCH', `/admin/apikeys/${key.key}`, {
      headers: await k.operator('support'),
      body: { level: 8, enabled: false, ratelimit: { limit: 1, duration: 1 } },
    });
    expect(response.status).toBe(200);
    expect(response.json.apikey).toMatchObject({ key: key.key, level: 8, enabled: false });
    expect(k.logLines('apikey.updated').at(-1)).toMatchObject({
      key: key.key,
      userId: 42,
      by: 'admin:support',
      changed: ['level', 'enabled', 'ratelimit'],
    });
    const verified = await k.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret } });
    expect(verified.json.code).toBe('DISABLED');
  });

  it('answers 400 for a bad update body, 404 for an unknown or expired key', async () => {
    const headers = await k.operator();
    const key = await k.createKey(42, { expiresIn: 1 });
    expect((await k.req('PATCH', `/admin/apikeys/${key.key}`, { headers, body: {} })).status).toBe(400);
    expect((await k.req('PATCH', `/admin/apikeys/${UNKNOWN}`, { headers, body: { name: 'x' } })).status).toBe(
      404,
    );
    k.time.now += 1000;
    expect((await k.req('PATCH', `/admin/apikeys/${key.key}`, { headers, body: { name: 'x' } })).status).toBe(
      404,
    );
    expect((await k.req('DELETE', `/admin/apikeys/${key.key}`, { headers })).status).toBe(404);
  });

  it('deletes any user’s key: 204, then it verifies no more, audited as the operator', async () => {
    const key = await k.createKey(42, { level: 8 });
    const response = await k.req('DELETE', `/admin/apikeys/${key.key}`, { headers: await k.operator('ops') });
    expect(response.status).toBe(204);
    expect(response.text).toBe('');
    const verified = await k.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret } });
    expect(verified.json.code).toBe('NOT_FOUND');
    expect(k.logLines('apikey.deleted').at(-1)).toMatchObject({ key: key.key, userId: 42, by: 'admin:ops' });
  });
});

describe('DELETE /admin/users/:userId/apikeys', () => {
  it('revokes every key of the user and no other’s, in one answer counting the live ones', async () => {
    const keys = [
      await k.createKey(42, { level: 8 }),
      await k.createKey(42),
      await k.createKey(42, { expiresIn: 1 }),
    ];
    const other = await k.createKey(7);
    // Each in the key cache before the revocation.
    for (const key of [...keys, other])
      await k.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret } });
    k.time.now += 1000;
    const response = await k.req('DELETE', '/admin/users/42/apikeys', { headers: await k.operator('ops') });
    expect(response.status).toBe(200);
    expect(response.json).toEqual({ result: 'success', deleted: 2 });
    for (const key of keys) {
      const verified = await k.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret } });
      expect(verified.json.code).toBe('NOT_FOUND');
    }
    const kept = await k.req('POST', '/apikeys/verify', { body: { key: other.key, secret: other.secret } });
    expect(kept.json.valid).toBe(true);
    expect(k.logLines('apikeys.revoked')).toEqual([
      expect.objectContaining({ userId: 42, count: 2, by: 'admin:ops' }),
    ]);
    const again = await k.req('DELETE', '/admin/users/42/apikeys', { headers: await k.operator() });
    expect(again.json).toEqual({ result: 'success', deleted: 0 });
    // The cap counts from nothing again.
    for (let i = 0; i < 3; i++) await k.createKey(42);
  });
});

describe('usage', () => {
  it('GET /admin/apikeys/:id/usage is the key’s history; /admin/users/:userId/usage sums the user’s keys', async () => {
    const a = await k.createKey(42);
    const b = await k.createKey(42);
    const other = await k.createKey(7);
    const verify = (key: { key: string; secret: string }, minLevel = 0) =>
      k.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret, minLevel } });
    await verify(a);
    await verify(a);
    await verify(b);
    await verify(b, 8); // level 3 < minLevel 8: denied
    await verify(other);
    const headers = await k.operator();
    const hour = new Date(k.time.now - (k.time.now % 3_600_000)).toISOString();
    const one = await k.req('GET', `/admin/apikeys/${a.key}/usage`, { headers });
    expect(one.json).toEqual({
      result: 'success',
      key: a.key,
      granularity: 'hour',
      usage: [{ start: hour, valid: 2, rateLimited: 0, usageExceeded: 0, denied: 0 }],
    });
    const all = await k.req('GET', '/admin/users/42/usage?granularity=day', { headers });
    const day = new Date(k.time.now - (k.time.now % 86_400_000)).toISOString();
    expect(all.json).toEqual({
      result: 'success',
      userId: 42,
      granularity: 'day',
      usage: [{ start: day, valid: 3, rateLimited: 0, usageExceeded: 0, denied: 1 }],
    });
    expect((await k.req('GET', `/admin/apikeys/${UNKNOWN}/usage`, { headers })).status).toBe(404);
    expect((await k.req('GET', '/admin/users/42/usage?granularity=week', { headers })).status).toBe(400);
    const nobody = await k.req('GET', '/admin/users/9/usage', { headers });
    expect(nobody.json).toEqual({ result: 'success', userId: 9, granularity: 'hour', usage: [] });
  });
});

describe('revoking 10,000 keys at once', () => {
  it('deletes them in one transaction, and counts them', async () => {
    const real = await k.createKey(42);
    const now = k.time.now;
    // Seeded in one statement: ids of the key format, a hash no secret has.
    const seed =
      k.keygate.engine === 'postgres'
        ? `INSERT INTO api_keys (id, secret_hash, user_id, level, name, created_at, expires_at)
           SELECT 'kg_seed' || lpad(i::text, 22, '0'), repeat('00', 32), 42, 1, 'seeded', $1::bigint, $1::bigint + 3600000
           FROM generate_series(1, 10000) AS i`
        : `INSERT INTO api_keys (id, secret_hash, user_id, level, name, created_at, expires_at)
           WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000)
           SELECT 'kg_seed' || substr('0000000000000000000000' || i, -22), zeroblob(32), 42, 1, 'seeded', $1, $1 + 3600000 FROM n`;
    await rawQuery(k.keygate, seed, [now]);
    const started = performance.now();
    const response = await k.req('DELETE', '/admin/users/42/apikeys', { headers: await k.operator() });
    const ms = performance.now() - started;
    expect(response.json).toEqual({ result: 'success', deleted: 10_001 });
    const [left] = await rawQuery(k.keygate, 'SELECT count(*) AS n FROM api_keys WHERE user_id = 42');
    expect(Number(left?.n)).toBe(0);
    expect(
      (await k.req('POST', '/apikeys/verify', { body: { key: real.key, secret: real.secret } })).json.code,
    ).toBe('NOT_FOUND');
    console.info(`revoke-all of 10,001 keys on ${k.keygate.engine}: ${ms.toFixed(0)} ms`);
  }, 60_000);
});
