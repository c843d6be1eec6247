// Key settings (meta, enabled, ratelimit, credits) on create and in key info, the update
// (PATCH /apikeys/:id/{jwt,key}) with its order of checks and who may change what, disabled keys, and
// what a rotation hands on. Under both schemes; on both engines (KEYGATE_TEST_DATABASE=postgres).
import { afterAll, beforeAll, describe, expect, it } from 'bun:test';
import { type TestKeygate, testKeygate } from '../support/keygate';

let k: TestKeygate;
beforeAll(async () => {
  k = await testKeygate();
});
afterAll(() => k.close());

const SETTINGS = {
  meta: { tenant: 'acme', plan: { tier: 2 } },
  enabled: true,
  ratelimit: { limit: 10, duration: 60 },
  credits: { remaining: 100, refill: { amount: 100, interval: 86_400 } },
};

async function create(sub: number, body: Record<string, unknown>, headers?: Record<string, string>) {
  return k.req('POST', '/apikeys/jwt', {
    headers: headers ?? (await k.bearer(sub)),
    body: { name: 'set', level: 3, expiresIn: 3600, ...body },
  });
}

const patch = (id: string, scheme: 'jwt' | 'key', headers: Record<string, string>, body: unknown) =>
  k.req('PATCH', `/apikeys/${id}/${scheme}`, { headers, body });

describe('settings on create', () => {
  it('answers exactly the settings the request gave, beside the six fields', async () => {
    for (const given of [{}, { meta: SETTINGS.meta }, { enabled: false }, SETTINGS]) {
      const created = await create(1, given);
      expect(created.status).toBe(201);
      const { key, secret, level, expiresAt, name, userId, ...rest } = created.json.apikey;
      expect([key, secret, level, expiresAt, name, userId].every((v) => v !== undefined)).toBe(true);
      expect(rest).toEqual(given);
    }
  });

  it('shows them in key info: enabled and lastUsedAt always, the others when set', async () => {
    const plain = (await create(1, {})).json.apikey;
    const full = (await create(1, SETTINGS)).json.apikey;
    const headers = await k.bearer(1);
    const info = async (id: string) => (await k.req('GET', `/apikeys/${id}/jwt`, { headers })).json.apikey;
    expect(await info(plain.key)).toMatchObject({ enabled: true, lastUsedAt: null });
    expect(Object.keys(await info(plain.key))).not.toContain('meta');
    expect(await info(full.key)).toMatchObject({
      enabled: true,
      lastUsedAt: null,
      meta: SETTINGS.meta,
      ratelimit: SETTINGS.ratelimit,
      credits: SETTINGS.credits,
    });
    const listed = (await k.req('GET', '/apikeys/jwt', { headers })).json.apikeys;
    expect(listed.find((item: { key: string }) => item.key === full.key)).toMatchObject({
      meta: SETTINGS.meta,
    });
  });

  it('adds meta to the verify principal when set', async () => {
    const key = (await create(1, { meta: SETTINGS.meta })).json.apikey;
    const verified = await k.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret } });
    expect(verified.json.principal.meta).toEqual(SETTINGS.meta);
  });

  it.each([
    ['meta an array', { meta: [1] }, 'meta'],
    ['meta null', { meta: null }, 'meta'],
    ['meta over 2048 bytes', { meta: { x: 'y'.repeat(2050) } }, 'meta'],
    ['enabled a string', { enabled: 'yes' }, 'enabled'],
    ['ratelimit limit 0', { ratelimit: { limit: 0, duration: 60 } }, 'ratelimit'],
    ['ratelimit duration 86401', { ratelimit: { limit: 1, duration: 86_401 } }, 'ratelimit'],
    ['ratelimit extra property', { ratelimit: { limit: 1, duration: 1, burst: 2 } }, 'ratelimit'],
    ['credits remaining -1', { credits: { remaining: -1 } }, 'credits'],
    ['credits remaining 1.5', { credits: { remaining: 1.5 } }, 'credits'],
    ['credits refill amount 0', { credits: { remaining: 1, refill: { amount: 0, interval: 1 } } }, 'credits'],
    ['credits refill without interval', { credits: { remaining: 1, refill: { amount: 1 } } }, 'credits'],
  ])('400 for %s', async (_, body, word) => {
    const response = await create(1, body);
    expect(response.status).toBe(400);
    expect(response.json).toEqual({ result: 'error', error: expect.stringContaining(word) });
  });

  it('refuses meta holding a number beyond a double’s range, which would come back as null', async () => {
    const body = '{"name":"set","level":3,"expiresIn":3600,"meta":{"a":[1,{"b":-1e999}]}}';
    const response = await k.req('POST', '/apikeys/jwt', { headers: await k.bearer(1), body });
    expect(response.status).toBe(400);
    expect(response.json.error).toContain('meta');
  });

  it('accepts meta of exactly 2048 bytes as compact JSON', async () => {
    const meta = { x: 'y'.repeat(2048 - '{"x":""}'.length) };
    expect(Buffer.byteLength(JSON.stringify(meta))).toBe(2048);
    expect((await create(1, { meta })).status).toBe(201);
  });
});

describe('disabled keys', () => {
  it('authenticate nothing, verify as DISABLED only with the right secret, and can be enabled again', async () => {
    const key = (await create(2, { enabled: false })).json.apikey;
    const basic = k.basic(key.key, key.secret);
    expect((await k.req('GET', '/apikeys/key', { headers: basic })).status).toBe(403);
    const fa = await k.req('GET', '/forward-auth', { headers: basic });
    expect(fa.status).toBe(403);
    expect(fa.headers.get('x-keygate-code')).toBe('DISABLED');
    const right = await k.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret } });
    expect(right.json).toMatchObject({ valid: false, code: 'DISABLED', principal: { key: key.key } });
    const wrong = await k.req('POST', '/apikeys/verify', {
      body: { key: key.key, secret: `${key.secret}x` },
    });
    expect(wrong.json).toEqual({ result: 'success', valid: false, code: 'NOT_FOUND' });
    // Still listed, still counted; enabled again by another credential of its user.
    const listed = (await k.req('GET', '/apikeys/jwt', { headers: await k.bearer(2) })).json.apikeys;
    expect(listed.find((item: { key: string }) => item.key === key.key)).toMatchObject({ enabled: false });
    expect((await patch(key.key, 'jwt', await k.bearer(2), { enabled: true })).status).toBe(200);
    expect((await k.req('GET', '/apikeys/key', { headers: basic })).status).toBe(200);
  });

  it('EXPIRED comes before DISABLED, DISABLED before INSUFFICIENT_LEVEL', async () => {
    const key = (await create(2, { enabled: false, expiresIn: 60 })).json.apikey;
    const body = { key: key.key, secret: key.secret, minLevel: 8 };
    expect((await k.req('POST', '/apikeys/verify', { body })).json.code).toBe('DISABLED');
    k.time.now += 60_000;
    expect((await k.req('POST', '/apikeys/verify', { body })).json.code).toBe('EXPIRED');
  });
});

describe.each(['jwt', 'key'] as const)('PATCH /apikeys/:id/%s', (scheme) => {
  const caller = async (sub: number, level = 8) => k.credentials(scheme, sub, level);

  it('changes what it is given, answers key info, and writes apikey.updated naming the properties', async () => {
    const key = (await create(3, {})).json.apikey;
    const headers = await caller(3);
    const response = await patch(key.key, scheme, headers, {
      name: 'renamed',
      meta: { a: 1 },
      level: 2,
      expiresIn: 7200,
      ratelimit: { limit: 5, duration: 10 },
      credits: { remaining: 7 },
    });
    expect(response.status).toBe(200);
    expect(response.json.apikey).toMatchObject({
      key: key.key,
      name: 'renamed',
      level: 2,
      meta: { a: 1 },
      ratelimit: { limit: 5, duration: 10 },
      credits: { remaining: 7 },
      expiresAt: new Date(k.time.now + 7_200_000).toISOString(),
    });
    const line = k.logLines('apikey.updated').at(-1);
    expect(line).toMatchObject({ key: key.key, userId: 3, requestId: expect.any(String) });
    expect([...line.changed].sort()).toEqual(['credits', 'expiresIn', 'level', 'meta', 'name', 'ratelimit']);
    expect(JSON.stringify(line)).not.toContain('"a":1');
  });

  it('removes meta, ratelimit and credits with null', async () => {
    const key = (await create(3, SETTINGS)).json.apikey;
    const response = await patch(key.key, scheme, await caller(3), {
      meta: null,
      ratelimit: null,
      credits: null,
    });
    expect(response.status).toBe(200);
    for (const gone of ['meta', 'ratelimit', 'credits'])
      expect(response.json.apikey).not.toHaveProperty(gone);
  });

  it.each([
    ['an empty object', {}],
    ['an unknown property', { colour: 'red' }],
    ['a name of spaces', { name: '   ' }],
    ['level 9', { level: 9 }],
    ['expiresIn 0', { expiresIn: 0 }],
    ['enabled null', { enabled: null }],
    ['ratelimit without duration', { ratelimit: { limit: 1 } }],
    ['an array', [{ name: 'x' }]],
  ])('400 for %s', async (_, body) => {
    const key = (await create(3, {})).json.apikey;
    const response = await patch(key.key, scheme, await caller(3), body);
    expect(response.status).toBe(400);
    expect(response.json.result).toBe('error');
  });

  it('checks in order: credentials, id, body, 404, level', async () => {
    const mine = (await create(4, { level: 5 })).json.apikey;
    const other = (await create(5, {})).json.apikey;
    // 401 before a malformed id and body; 400 for the id before the body; 400 for the body before 404.
    expect((await patch('nope', scheme, {}, 'not json')).status).toBe(401);
    expect((await patch('nope', scheme, await caller(4), {})).status).toBe(400);
    expect((await patch(other.key, scheme, await caller(4), {})).status).toBe(400);
    expect((await patch(other.key, scheme, await caller(4), { name: 'x' })).status).toBe(404);
    // The key's level above the caller's, or the new level above it: 403.
    expect((await patch(mine.key, scheme, await caller(4, 4), { name: 'x' })).status).toBe(403);
    const low = (await create(4, { level: 2 })).json.apikey;
    expect((await patch(low.key, scheme, await caller(4, 4), { level: 5 })).status).toBe(403);
    expect((await patch(low.key, scheme, await caller(4, 4), { level: 4 })).status).toBe(200);
  });

  it('404 for an expired key, as for delete', async () => {
    const key = (await create(4, { expiresIn: 10 })).json.apikey;
    const headers = await caller(4);
    k.time.now += 10_000;
    expect((await patch(key.key, scheme, headers, { name: 'x' })).status).toBe(404);
  });
});

describe('who may change what', () => {
  it('a key updating itself may tighten only', async () => {
    const key = (await create(6, { level: 4, expiresIn: 3600 })).json.apikey;
    const self = k.basic(key.key, key.secret);
    const refused: Array<Record<string, unknown>> = [
      { ratelimit: { limit: 1, duration: 1 } },
      { credits: { remaining: 1 } },
      { expiresIn: 7200 },
      { level: 5 },
      { enabled: true },
    ];
    for (const body of refused) {
      const response = await patch(key.key, 'key', self, body);
      expect([JSON.stringify(body), response.status]).toEqual([JSON.stringify(body), 403]);
    }
    for (const body of [{ name: 'mine' }, { meta: { note: 'x' } }, { level: 3 }, { expiresIn: 600 }]) {
      const response = await patch(key.key, 'key', self, body);
      expect([JSON.stringify(body), response.status]).toEqual([JSON.stringify(body), 200]);
    }
    expect((await patch(key.key, 'key', self, { enabled: false })).status).toBe(200);
    expect((await k.req('GET', '/apikeys/key', { headers: self })).status).toBe(403);
  });

  it('a constrained key may not create, rotate or update other keys, but may rotate itself', async () => {
    for (const constraint of [{ ratelimit: { limit: 5, duration: 60 } }, { credits: { remaining: 5 } }]) {
      const leaf = (await create(7, { level: 5, ...constraint })).json.apikey;
      const other = (await create(7, { level: 1 })).json.apikey;
      const headers = k.basic(leaf.key, leaf.secret);
      const created = await k.req('POST', '/apikeys/key', {
        headers,
        body: { name: 'child', level: 1, expiresIn: 60 },
      });
      expect(created.status).toBe(403);
      expect((await patch(other.key, 'key', headers, { name: 'x' })).status).toBe(403);
      expect((await k.req('POST', `/apikeys/${other.key}/rotate/key`, { headers })).status).toBe(403);
      const rotated = await k.req('POST', `/apikeys/${leaf.key}/rotate/key`, { headers });
      expect(rotated.status).toBe(201);
      expect(rotated.json.apikey).toMatchObject(constraint);
    }
  });

  it('an unconstrained key may change anything on its user’s other keys within its level', async () => {
    const boss = (await create(8, { level: 5 })).json.apikey;
    const other = (await create(8, { level: 2 })).json.apikey;
    const response = await patch(other.key, 'key', k.basic(boss.key, boss.secret), {
      ratelimit: { limit: 3, duration: 5 },
      credits: { remaining: 9 },
      expiresIn: 9000,
    });
    expect(response.status).toBe(200);
  });
});

describe('a rotation', () => {
  it('copies meta and enabled, hands on the rate limit and the credits, and its apikey carries them', async () => {
    const old = (
      await create(9, { meta: { m: 1 }, ratelimit: { limit: 4, duration: 9 }, credits: { remaining: 42 } })
    ).json.apikey;
    const rotated = await k.req('POST', `/apikeys/${old.key}/rotate/jwt`, {
      headers: await k.bearer(9),
      body: { gracePeriod: 60 },
    });
    expect(rotated.status).toBe(201);
    expect(rotated.json.apikey).toMatchObject({
      meta: { m: 1 },
      ratelimit: { limit: 4, duration: 9 },
      credits: { remaining: 42 },
    });
    // One pool: the old key in its grace period and the new key show the same credits.
    const headers = await k.bearer(9);
    const info = async (id: string) => (await k.req('GET', `/apikeys/${id}/jwt`, { headers })).json.apikey;
    await patch(rotated.json.apikey.key, 'jwt', headers, { credits: { remaining: 7 } });
    expect((await info(old.key)).credits).toEqual({ remaining: 7 });
    expect((await info(rotated.json.apikey.key)).credits).toEqual({ remaining: 7 });
  });
});
