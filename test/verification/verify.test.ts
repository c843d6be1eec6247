// POST /apikeys/verify: every code and principal shape, every 400, and keys refused at once after a
// delete (docs/api.md, "Verify").
import { afterEach, beforeEach, describe, expect, it } from 'bun:test';
import { type TestKeygate, testKeygate } from '../support/keygate';

let k: TestKeygate;
beforeEach(async () => {
  k = await testKeygate();
});
afterEach(() => k.close());

const verify = (body: unknown, headers?: Record<string, string>) =>
  k.req('POST', '/apikeys/verify', { body, headers });

describe('POST /apikeys/verify answers 200 with a code', () => {
  it('VALID with the key principal', async () => {
    const key = await k.createKey(42, { level: 3, name: 'ci' });
    const response = await verify({ key: key.key, secret: key.secret });
    expect(response.status).toBe(200);
    expect(response.headers.get('cache-control')).toBe('no-store');
    expect(response.headers.get('content-type')).toStartWith('application/json');
    expect(response.json).toEqual({
      result: 'success',
      valid: true,
      code: 'VALID',
      principal: { type: 'key', key: key.key, userId: 42, level: 3, name: 'ci', expiresAt: key.expiresAt },
    });
    // Written field by field as JSON.stringify writes the verdict: the same bytes, in this order.
    expect(response.text).toBe(JSON.stringify(response.json));
    expect(Object.keys(response.json)).toEqual(['result', 'valid', 'code', 'principal']);
  });

  it("writes each principal as JSON.stringify writes it, and a key's as it stands after an update", async () => {
    const created = await k.req('POST', '/apikeys/jwt', {
      headers: await k.bearer(42),
      body: {
        name: 'quote " back\\slash',
        level: 3,
        expiresIn: 3600,
        meta: { plan: 'pro', note: 'line\nbreak \u2028 é 東京', nested: { n: 1, list: [true, null] } },
        permissions: ['documents.read', 'billing.*'],
        allowedIps: ['10.0.0.0/8'],
      },
    });
    const { key, secret } = created.json.apikey as { key: string; secret: string };
    const sameBytes = async (body: Record<string, unknown>, code: string) => {
      const response = await verify({ key, secret, clientIp: '10.1.2.3', ...body });
      expect(response.json.code).toBe(code);
      expect(response.text).toBe(JSON.stringify(response.json));
      expect(Object.keys(response.json)).toEqual(['result', 'valid', 'code', 'principal']);
      return response.json.principal;
    };
    const principal = {
      type: 'key',
      key,
      userId: 42,
      level: 3,
      name: 'quote " back\\slash',
      expiresAt: created.json.apikey.expiresAt,
      meta: { plan: 'pro', note: 'line\nbreak \u2028 é 東京', nested: { n: 1, list: [true, null] } },
      permissions: ['documents.read', 'billing.*'],
      allowedIps: ['10.0.0.0/8'],
    };
    expect(await sameBytes({}, 'VALID')).toEqual(principal);
    expect(await sameBytes({ minLevel: 4 }, 'INSUFFICIENT_LEVEL')).toEqual(principal);
    expect(await sameBytes({ permissions: 'admin' }, 'INSUFFICIENT_PERMISSIONS')).toEqual(principal);
    expect(await sameBytes({ clientIp: '192.0.2.1' }, 'IP_NOT_ALLOWED')).toEqual(principal);
    const update = async (body: unknown) =>
      k.req('PATCH', `/apikeys/${key}/jwt`, { headers: await k.bearer(42), body });
    expect((await update({ name: 'renamed', meta: { plan: 'team' }, enabled: false })).status).toBe(200);
    const updated = { ...principal, name: 'renamed', meta: { plan: 'team' } };
    expect(await sameBytes({}, 'DISABLED')).toEqual(updated);
    expect((await update({ enabled: true, meta: null, permissions: null })).status).toBe(200);
    const { meta: _meta, permissions: _permissions, ...plain } = updated;
    expect(await sameBytes({}, 'VALID')).toEqual(plain);
    // A principal too long to keep its text (a meta near its 2,048 bytes) is written anew, alike.
    const large = { tenant: 'x'.repeat(1900), quote: '"' };
    expect((await update({ meta: large })).status).toBe(200);
    expect(await sameBytes({}, 'VALID')).toEqual({ ...plain, meta: large });
  });

  it("writes a limited key's answers, and those without a principal, as JSON.stringify writes them", async () => {
    const limited = await k.createKey(42, {
      meta: { plan: 'pro' },
      ratelimit: { limit: 2, duration: 60 },
      credits: { remaining: 2, refill: { amount: 1, interval: 60 } },
    });
    const unrefilled = await k.createKey(43, { credits: { remaining: 0 } });
    const expiring = await k.createKey(44, { expiresIn: 60 });
    const fields = (...after: string[]) => ['result', 'valid', 'code', 'principal', ...after];
    const answers: [Record<string, unknown>, string, string[]][] = [
      [{ ...limited }, 'VALID', fields('ratelimit', 'credits')],
      [{ ...limited, cost: 5 }, 'USAGE_EXCEEDED', fields('credits', 'retryAfter')],
      [{ ...limited }, 'VALID', fields('ratelimit', 'credits')],
      [{ ...limited }, 'RATE_LIMITED', fields('ratelimit', 'retryAfter')],
      [{ ...unrefilled }, 'USAGE_EXCEEDED', fields('credits')],
      [{ token: 'not-a-jwt' }, 'INVALID_TOKEN', ['result', 'valid', 'code']],
    ];
    for (const [body, code, keys] of answers) {
      const { key, secret, token, cost } = body;
      const response = await verify(token === undefined ? { key, secret, cost } : { token });
      expect(response.json.code).toBe(code);
      expect(Object.keys(response.json)).toEqual(keys);
      expect(response.text).toBe(JSON.stringify(response.json));
    }
    k.time.now += 60_000;
    const expired = await verify({ key: expiring.key, secret: expiring.secret });
    expect(expired.text).toBe('{"result":"success","valid":false,"code":"EXPIRED"}');
  });

  it('VALID with the token principal, exp as ISO ms', async () => {
    const token = await k.token(9, { level: 4, ttlSeconds: 90 });
    const response = await verify({ token });
    expect(response.json).toEqual({
      result: 'success',
      valid: true,
      code: 'VALID',
      principal: { type: 'jwt', userId: 9, level: 4, expiresAt: new Date(k.time.now + 90_000).toISOString() },
    });
  });

  it('NOT_FOUND, identical for an unknown key, a wrong secret and a key not of the kg_ format', async () => {
    const key = await k.createKey(42);
    const bodies = [
      { key: 'kg_0000000000000000000000', secret: key.secret },
      { key: key.key, secret: `${key.secret}x` },
      { key: key.key, secret: '' },
      { key: 'not-a-key', secret: key.secret },
      { key: '', secret: '' },
    ];
    for (const body of bodies) {
      const response = await verify(body);
      expect(response.status).toBe(200);
      expect(response.headers.get('cache-control')).toBe('no-store');
      expect(response.text).toBe('{"result":"success","valid":false,"code":"NOT_FOUND"}');
    }
  });

  it('EXPIRED only when the secret matched', async () => {
    const key = await k.createKey(42, { expiresIn: 60 });
    k.time.now += 60_000;
    expect((await verify({ key: key.key, secret: key.secret })).json).toEqual({
      result: 'success',
      valid: false,
      code: 'EXPIRED',
    });
    expect((await verify({ key: key.key, secret: `${key.secret}x` })).json.code).toBe('NOT_FOUND');
  });

  it('INVALID_TOKEN for any token the JWT scheme refuses', async () => {
    const expiring = await k.token(1, { ttlSeconds: 10 });
    for (const token of ['', 'not-a-jwt', 'a.b.c', `${await k.token(1)}x`]) {
      expect((await verify({ token })).json).toEqual({
        result: 'success',
        valid: false,
        code: 'INVALID_TOKEN',
      });
    }
    k.time.now += 10_000;
    expect((await verify({ token: expiring })).json.code).toBe('INVALID_TOKEN');
  });

  it('INSUFFICIENT_LEVEL with the principal when the level is below minLevel, VALID at it', async () => {
    const key = await k.createKey(42, { level: 3 });
    const token = await k.token(42, { level: 3 });
    for (const credential of [{ key: key.key, secret: key.secret }, { token }]) {
      const below = await verify({ ...credential, minLevel: 4 });
      expect(below.json).toMatchObject({ result: 'success', valid: false, code: 'INSUFFICIENT_LEVEL' });
      expect(below.json.principal.level).toBe(3);
      expect((await verify({ ...credential, minLevel: 3 })).json.code).toBe('VALID');
      expect((await verify({ ...credential, minLevel: 0 })).json.code).toBe('VALID');
    }
  });

  it('needs no caller authentication and ignores credential headers', async () => {
    const key = await k.createKey(42);
    const response = await verify({ key: key.key, secret: key.secret }, { authorization: 'Bearer junk' });
    expect(response.json.code).toBe('VALID');
  });

  it('refuses a key deleted after it was cached on the very next verify', async () => {
    const key = await k.createKey(42);
    expect((await verify({ key: key.key, secret: key.secret })).json.code).toBe('VALID');
    await k.req('DELETE', `/apikeys/${key.key}/jwt`, { headers: await k.bearer(42) });
    expect((await verify({ key: key.key, secret: key.secret })).json.code).toBe('NOT_FOUND');
  });
});

describe('POST /apikeys/verify answers 400 for a body that is not well formed', () => {
  it.each([
    ['both forms', { key: 'kg_0000000000000000000000', secret: 's', token: 't' }],
    ['both forms, secret and token', { secret: 's', token: 't' }],
    ['neither form', {}],
    ['only minLevel', { minLevel: 1 }],
    ['key without secret', { key: 'kg_0000000000000000000000' }],
    ['secret without key', { secret: 's' }],
    ['an extra property', { token: 't', extra: 1 }],
    ['key not a string', { key: 1, secret: 's' }],
    ['secret not a string', { key: 'k', secret: null }],
    ['token not a string', { token: ['t'] }],
    ['minLevel 9', { token: 't', minLevel: 9 }],
    ['minLevel -1', { token: 't', minLevel: -1 }],
    ['minLevel 1.5', { token: 't', minLevel: 1.5 }],
    ['minLevel "3"', { token: 't', minLevel: '3' }],
    ['an array', [{ token: 't' }]],
    ['a string', '"token"'],
    ['null', 'null'],
  ])('%s', async (_, body) => {
    const response = await verify(body);
    expect(response.status).toBe(400);
    expect(response.headers.get('content-type')).toBe('application/json');
    expect(response.json).toEqual({ result: 'error', error: expect.any(String) });
  });

  it.each([
    ['no Content-Type', { 'content-type': '' }, '{"token":"t"}'],
    ['text/plain', { 'content-type': 'text/plain' }, '{"token":"t"}'],
    ['not JSON', {}, '{"token":'],
    ['empty', {}, ''],
  ])('%s', async (_, headers, body) => {
    const response = await k.keygate.handle(
      new Request('http://localhost/apikeys/verify', {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
      }),
    );
    expect(response.status).toBe(400);
    expect(((await response.json()) as { result: string }).result).toBe('error');
  });

  it.each([
    ['{"token":"t","extra":1,"other":2}', 'Unknown property "extra"'],
    ['{"__proto__":{},"token":"t"}', 'Unknown property "__proto__"'],
    [`{"${'x'.repeat(100)}":1}`, `Unknown property "${'x'.repeat(40)}":`],
    ['{"key":"k","secret":1}', 'secret must be a string.'],
    ['{"key":"k"}', 'key and secret go together: send both.'],
  ])('%s: the 400 names the first problem', async (body, message) => {
    const response = await verify(body);
    expect(response.status).toBe(400);
    expect(response.json.error).toStartWith(message);
  });

  it.each([
    ['an invalid byte', [0xff], 400],
    ['a real U+FFFD beside an invalid byte', [0xef, 0xbf, 0xbd, 0xff], 400],
    ['a real U+FFFD only (valid UTF-8: a token that fails)', [0xef, 0xbf, 0xbd], 200],
  ])('a token with %s', async (_, bytes, status) => {
    const body = new Uint8Array([
      ...new TextEncoder().encode('{"token":"t'),
      ...bytes,
      ...new TextEncoder().encode('"}'),
    ]);
    const response = await verify(body, { 'content-type': 'application/json' });
    expect(response.status).toBe(status);
    expect(response.json).toEqual(
      status === 400
        ? { result: 'error', error: 'The body is not valid UTF-8.' }
        : { result: 'success', valid: false, code: 'INVALID_TOKEN' },
    );
  });

  it('413 over 16 KiB', async () => {
    const response = await verify({ token: 'x'.repeat(17 * 1024) });
    expect(response.status).toBe(413);
  });

  it('is POST only', async () => {
    expect((await k.req('GET', '/apikeys/verify')).status).toBe(404);
  });
});
