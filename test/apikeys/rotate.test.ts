// Rotating keys under both schemes: the new key copies name, level, user and expiry; the old one
// stops at once or after the grace period; the cap with grace; the contract's order of checks.
import { afterEach, beforeEach, describe, expect, it } from 'bun:test';
import { type TestKeygate, testKeygate } from '../support/keygate';

let k: TestKeygate;
beforeEach(async () => {
  k = await testKeygate({ MAX_KEYS_PER_USER: '5' });
});
afterEach(() => k.close());

/** Credentials for user 42 at `level` under each scheme. */
const schemes = {
  jwt: (level?: number) => k.credentials('jwt', 42, level),
  key: (level?: number) => k.credentials('key', 42, level),
};
type Scheme = keyof typeof schemes;

const verify = (key: string, secret: string) =>
  k.req('POST', '/apikeys/verify', { body: { key, secret } }).then((response) => response.json.code);

describe.each(Object.keys(schemes) as Scheme[])('POST /apikeys/:id/rotate/%s', (scheme) => {
  const rotate = (id: string, headers: Record<string, string>, body?: unknown) =>
    k.req('POST', `/apikeys/${id}/rotate/${scheme}`, { headers, body });

  it('without a body: 201, no-store, a new key like the old, and the old one refused at once', async () => {
    const headers = await schemes[scheme]();
    const old = await k.createKey(42, { name: 'ci', level: 3, expiresIn: 7200 });
    expect(await verify(old.key, old.secret)).toBe('VALID'); // now in the key cache
    k.time.now += 1000;
    const response = await rotate(old.key, headers);
    expect(response.status).toBe(201);
    expect(response.headers.get('cache-control')).toBe('no-store');
    const { apikey, previous } = response.json;
    expect(response.json.result).toBe('success');
    expect(apikey).toEqual({
      key: expect.stringMatching(/^kg_[A-Za-z0-9]{30}$/),
      secret: expect.stringMatching(/^[A-Za-z0-9_-]{43,}$/),
      name: 'ci',
      level: 3,
      userId: 42,
      expiresAt: old.expiresAt,
    });
    expect(apikey.key).not.toBe(old.key);
    expect(previous).toEqual({ key: old.key, expiresAt: new Date(k.time.now).toISOString() });
    // Its expiry became the moment of rotation: refused, as expired, until the purge removes it.
    expect(await verify(old.key, old.secret)).toBe('EXPIRED');
    expect(await verify(apikey.key, apikey.secret)).toBe('VALID');
    const viaKeyScheme = await k.req('GET', '/apikeys/key', { headers: k.basic(old.key, old.secret) });
    expect(viaKeyScheme.status).toBe(403);
  });

  it('with a grace period: the old key works until now + grace, then stops', async () => {
    const headers = await schemes[scheme]();
    const old = await k.createKey(42, { expiresIn: 7200 });
    const response = await rotate(old.key, headers, { gracePeriod: 60 });
    expect(response.status).toBe(201);
    expect(response.json.previous.expiresAt).toBe(new Date(k.time.now + 60_000).toISOString());
    k.time.now += 59_999;
    expect(await verify(old.key, old.secret)).toBe('VALID');
    const forwardAuth = await k.req('GET', '/forward-auth', { headers: k.basic(old.key, old.secret) });
    expect(forwardAuth.headers.get('x-keygate-expires-at')).toBe(response.json.previous.expiresAt);
    k.time.now += 1;
    expect(await verify(old.key, old.secret)).toBe('EXPIRED');
  });

  it('a grace period longer than the key’s life leaves its expiry as it was', async () => {
    const headers = await schemes[scheme]();
    const old = await k.createKey(42, { expiresIn: 30 });
    const response = await rotate(old.key, headers, { gracePeriod: 3600 });
    expect(response.json.previous.expiresAt).toBe(old.expiresAt);
    expect(response.json.apikey.expiresAt).toBe(old.expiresAt);
  });

  it.each([{}, { gracePeriod: 0 }])('accepts %j as the defaults', async (body) => {
    const headers = await schemes[scheme]();
    const old = await k.createKey(42);
    const response = await rotate(old.key, headers, body);
    expect(response.status).toBe(201);
    expect(response.json.previous.expiresAt).toBe(new Date(k.time.now).toISOString());
  });

  it('at the cap: 409 with a grace period (nothing changes), 201 without', async () => {
    const headers = await schemes[scheme]();
    const first = await k.createKey(42);
    while (
      (
        await k.req('POST', '/apikeys/jwt', {
          headers: await k.bearer(42),
          body: { name: 'f', level: 1, expiresIn: 60 },
        })
      ).status === 201
    );
    const refused = await rotate(first.key, headers, { gracePeriod: 10 });
    expect(refused.status).toBe(409);
    expect(refused.json.result).toBe('error');
    expect(await verify(first.key, first.secret)).toBe('VALID');
    const rotated = await rotate(first.key, headers, { gracePeriod: 0 });
    expect(rotated.status).toBe(201);
    expect(await verify(first.key, first.secret)).toBe('EXPIRED');
  });

  it('404 alike for another user’s key, an expired key, an unknown key and a rotated-out key', async () => {
    const headers = await schemes[scheme]();
    const others = await k.createKey(7);
    const expiring = await k.createKey(42, { expiresIn: 5 });
    const rotatedOut = await k.createKey(42);
    expect((await rotate(rotatedOut.key, headers)).status).toBe(201);
    k.time.now += 5000;
    for (const id of [others.key, expiring.key, 'kg_0000000000000000000000', rotatedOut.key]) {
      const response = await rotate(id, headers);
      expect([id, response.status]).toEqual([id, 404]);
      expect(response.json.error).toBe('No such key.');
    }
  });

  it('403 for the caller’s own key above its level', async () => {
    const headers = await schemes[scheme](2);
    const high = await k.createKey(42, { level: 3 });
    expect((await rotate(high.key, headers)).status).toBe(403);
  });

  it.each([
    ['a negative grace', { gracePeriod: -1 }],
    ['a grace over 30 days', { gracePeriod: 2_592_001 }],
    ['a fractional grace', { gracePeriod: 1.5 }],
    ['a string grace', { gracePeriod: '10' }],
    ['an extra property', { gracePeriod: 1, name: 'x' }],
    ['an array', [1]],
    ['null', 'null'],
    ['not JSON', '{'],
  ])('400 for %s', async (_, body) => {
    const headers = await schemes[scheme]();
    const old = await k.createKey(42);
    const response = await rotate(old.key, headers, body);
    expect(response.status).toBe(400);
    expect(response.json.result).toBe('error');
  });

  it('400 for a non-empty body without the JSON Content-Type', async () => {
    const headers = await schemes[scheme]();
    const old = await k.createKey(42);
    const response = await rotate(old.key, { ...headers, 'content-type': 'text/plain' }, '{"gracePeriod":1}');
    expect(response.status).toBe(400);
    expect(response.json.error).toContain('Content-Type');
  });

  it('reads the body only after the credentials and the id format passed', async () => {
    const old = await k.createKey(42);
    const invalid =
      scheme === 'jwt' ? { authorization: 'Bearer x' } : k.basic('kg_0000000000000000000000', 'x');
    const rotatePath = (id: string) => `/apikeys/${id}/rotate/${scheme}`;
    const body = { gracePeriod: 5 };
    expect(await k.postTellingIfRead(rotatePath(old.key), {}, body)).toEqual({ status: 401, read: false });
    expect(await k.postTellingIfRead(rotatePath(old.key), invalid, body)).toEqual({
      status: 403,
      read: false,
    });
    const headers = await schemes[scheme]();
    expect(await k.postTellingIfRead(rotatePath('nope'), headers, body)).toEqual({
      status: 400,
      read: false,
    });
    expect(await k.postTellingIfRead(rotatePath(old.key), headers, body)).toEqual({
      status: 201,
      read: true,
    });
  });

  it('checks in order: credentials → id format → body → 404 → level → cap', async () => {
    const low = await schemes[scheme](1);
    const bad = { gracePeriod: -1 };
    // No credentials beat everything else.
    const none = await k.req('POST', `/apikeys/nope/rotate/${scheme}`, { body: bad });
    expect(none.status).toBe(401);
    // Invalid credentials beat a bad id.
    const invalid =
      scheme === 'jwt' ? { authorization: 'Bearer x' } : k.basic('kg_0000000000000000000000', 'x');
    expect((await rotate('nope', invalid, bad)).status).toBe(403);
    // A bad id beats a bad body.
    expect((await rotate('nope', low, bad)).json.error).toContain('key id');
    // A bad body beats an unknown key.
    expect((await rotate('kg_0000000000000000000000', low, bad)).status).toBe(400);
    // 404 beats the level: another user's key above the caller's level.
    const othersHigh = await k.createKey(7, { level: 8 });
    expect((await rotate(othersHigh.key, low, { gracePeriod: 5 })).status).toBe(404);
    // The level beats the cap.
    const ownHigh = await k.createKey(42, { level: 8 });
    while (
      (
        await k.req('POST', '/apikeys/jwt', {
          headers: await k.bearer(42),
          body: { name: 'f', level: 0, expiresIn: 60 },
        })
      ).status === 201
    );
    expect((await rotate(ownHigh.key, low, { gracePeriod: 5 })).status).toBe(403);
    // And then the cap.
    const ownLow = (await k.req('GET', `/apikeys/${scheme}?limit=100`, { headers: low })).json.apikeys[0];
    expect((await rotate(ownLow.key, low, { gracePeriod: 5 })).status).toBe(409);
  });
});
