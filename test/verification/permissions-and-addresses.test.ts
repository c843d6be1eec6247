// What verify says of permissions and addresses: the query in the body (a 400 that says
// where it is wrong), INSUFFICIENT_PERMISSIONS and IP_NOT_ALLOWED in the verdict order, a token's
// permissions from its scope, clientIp (fail closed), and refusals that use no rate limit or credit
// and count as denied. On both engines (KEYGATE_TEST_DATABASE=postgres).
import { afterAll, beforeAll, describe, expect, it } from 'bun:test';
import { type TestKeygate, testKeygate } from '../support/keygate';

let k: TestKeygate;
beforeAll(async () => {
  k = await testKeygate();
});
afterAll(() => k.close());

let nextUser = 8000;
const freshUser = () => nextUser++;

async function newKey(body: Record<string, unknown> = {}, user = freshUser()) {
  const created = await k.req('POST', '/apikeys/jwt', {
    headers: await k.bearer(user),
    body: { name: 'v', level: 3, expiresIn: 3600, ...body },
  });
  if (created.status !== 201) throw new Error(created.text);
  return created.json.apikey as { key: string; secret: string; userId: number };
}
const verify = (body: Record<string, unknown>) => k.req('POST', '/apikeys/verify', { body });
const verifyKey = (key: { key: string; secret: string }, extra: Record<string, unknown> = {}) =>
  verify({ key: key.key, secret: key.secret, ...extra });

describe('the permissions query in verify', () => {
  it.each([
    ['documents.read', true],
    ['documents.comments.write', true],
    ['documents', false],
    ['billing.read', true],
    ['billing.write', false],
    ['documents.read AND billing.read', true],
    ['billing.write OR documents.read', true],
    ['billing.write OR admin AND documents.read', false],
    ['(billing.write OR admin) AND documents.read', false],
    ['billing.write OR documents.read AND billing.read', true],
    ['documents.read and (billing.write or billing.read)', true],
    ['  documents.read  ', true],
  ])('a key holding documents.* and billing.read asked %j: valid %p', async (query, valid) => {
    const key = await newKey({ permissions: ['documents.*', 'billing.read'] });
    const answer = await verifyKey(key, { permissions: query });
    expect(answer.status).toBe(200);
    expect(answer.json.code).toBe(valid ? 'VALID' : 'INSUFFICIENT_PERMISSIONS');
    expect(answer.json.valid).toBe(valid);
    expect(answer.json.principal.permissions).toEqual(['documents.*', 'billing.read']);
  });

  it('fails every query for a key without permissions, and passes when none is asked', async () => {
    const key = await newKey();
    expect((await verifyKey(key, { permissions: 'a' })).json.code).toBe('INSUFFICIENT_PERMISSIONS');
    expect((await verifyKey(key)).json.code).toBe('VALID');
  });

  it('lets * cover every name', async () => {
    const key = await newKey({ permissions: ['*'] });
    expect((await verifyKey(key, { permissions: 'x AND y.z AND a:b/c-d' })).json.code).toBe('VALID');
  });

  it.each([
    ['', 'empty'],
    ['   ', 'whitespace'],
    ['a AND', 'end'],
    ['OR a', '1'],
    ['a AND OR b', 'OR'],
    ['a b', 'b'],
    ['(a', ')'],
    ['a)', ')'],
    ['()', '('],
    ['documents.*', 'wildcard'],
    ['*', 'wildcard'],
    ['a%b', '%'],
    ['x'.repeat(1001), '1000'],
    [Array.from({ length: 101 }, (_, i) => `p${i}`).join(' OR '), '100'],
  ])('refuses the query %j with a 400 naming the problem (%s)', async (query, named) => {
    const key = await newKey({ permissions: ['*'] });
    const answer = await verifyKey(key, { permissions: query });
    expect(answer.status).toBe(400);
    expect(answer.json.result).toBe('error');
    expect(answer.json.error.toLowerCase()).toContain(named.toLowerCase());
  });

  it('refuses a permissions query that is not a string', async () => {
    const key = await newKey();
    for (const permissions of [['a'], 1, null, {}]) {
      expect((await verifyKey(key, { permissions })).status).toBe(400);
    }
  });

  it('accepts 100 names and 1000 characters', async () => {
    const key = await newKey({ permissions: ['*'] });
    const hundred = Array.from({ length: 100 }, (_, i) => `p${i}`).join(' OR ');
    expect((await verifyKey(key, { permissions: hundred })).json.code).toBe('VALID');
    const long = `${Array.from({ length: 7 }, (_, i) => `${i}`.repeat(128)).join(' OR ')}${' '.repeat(80)}`;
    expect(long.length).toBe(1000);
    expect((await verifyKey(key, { permissions: long })).json.code).toBe('VALID');
  });
});

describe("a token's permissions", () => {
  it('are the entries of its scope claim, shown in its principal', async () => {
    const token = await k.token(freshUser(), { scope: 'documents.read billing.*' });
    const answer = await verify({ token, permissions: 'documents.read AND billing.write' });
    expect(answer.json.code).toBe('VALID');
    expect(answer.json.principal.permissions).toEqual(['documents.read', 'billing.*']);
    const refused = await verify({ token, permissions: 'admin' });
    expect(refused.json).toMatchObject({ valid: false, code: 'INSUFFICIENT_PERMISSIONS' });
  });

  it('are none without a scope claim: no permissions in the principal, any query fails', async () => {
    const token = await k.token(freshUser());
    expect(Object.keys((await verify({ token })).json.principal)).not.toContain('permissions');
    expect((await verify({ token, permissions: 'a' })).json.code).toBe('INSUFFICIENT_PERMISSIONS');
  });

  it('comes after the level: a token below minLevel is INSUFFICIENT_LEVEL whatever the query', async () => {
    const token = await k.token(freshUser(), { level: 2 });
    expect((await verify({ token, minLevel: 3, permissions: 'a' })).json.code).toBe('INSUFFICIENT_LEVEL');
  });

  it('is never refused by address', async () => {
    const token = await k.token(freshUser());
    expect((await verify({ token, clientIp: '203.0.113.9' })).json.code).toBe('VALID');
  });
});

describe('allowedIps and clientIp', () => {
  it('shows allowedIps in key info and the principal', async () => {
    const user = freshUser();
    const key = await newKey({ allowedIps: ['203.0.113.0/24', '2001:db8::/32'] }, user);
    const got = await k.req('GET', `/apikeys/${key.key}/jwt`, { headers: await k.bearer(user) });
    expect(got.json.apikey.allowedIps).toEqual(['203.0.113.0/24', '2001:db8::/32']);
    const answer = await verifyKey(key, { clientIp: '203.0.113.9' });
    expect(answer.json.principal.allowedIps).toEqual(['203.0.113.0/24', '2001:db8::/32']);
  });

  it.each([
    ['203.0.113.9', 'VALID'],
    ['203.0.114.1', 'IP_NOT_ALLOWED'],
    ['::ffff:203.0.113.7', 'VALID'],
    ['2001:db8:1::5', 'VALID'],
    ['2001:db9::1', 'IP_NOT_ALLOWED'],
    ['198.51.100.1', 'VALID'],
    ['198.51.100.2', 'IP_NOT_ALLOWED'],
  ])('a key allowed 203.0.113.0/24, 2001:db8::/32, 198.51.100.1 used from %s: %s', async (clientIp, code) => {
    const key = await newKey({ allowedIps: ['203.0.113.0/24', '2001:db8::/32', '198.51.100.1'] });
    expect((await verifyKey(key, { clientIp })).json.code).toBe(code);
  });

  it('fails closed: a key with allowedIps verified without clientIp is IP_NOT_ALLOWED', async () => {
    const key = await newKey({ allowedIps: ['0.0.0.0/0'] });
    const answer = await verifyKey(key);
    expect(answer.json).toMatchObject({ valid: false, code: 'IP_NOT_ALLOWED' });
    expect(answer.json.principal.key).toBe(key.key);
  });

  it('lets a key without allowedIps be used from anywhere, with or without clientIp', async () => {
    const key = await newKey();
    expect((await verifyKey(key)).json.code).toBe('VALID');
    expect((await verifyKey(key, { clientIp: '2001:db8::1' })).json.code).toBe('VALID');
  });

  it.each(['203.0.113.256', '203.0.113.0/24', 'localhost', '', '::1%lo', 5])(
    'refuses clientIp %j with a 400',
    async (clientIp) => {
      const key = await newKey();
      const answer = await verifyKey(key, { clientIp });
      expect(answer.status).toBe(400);
      expect(answer.json.error).toContain('clientIp');
    },
  );

  it.each([
    [[], 'allowedIps'],
    [Array.from({ length: 51 }, (_, i) => `10.0.0.${i}`), 'allowedIps'],
    [['10.0.0.0/33'], '10.0.0.0/33'],
    [['example.com'], 'example.com'],
  ])('refuses allowedIps %j on create with a 400 (%s)', async (allowedIps, named) => {
    const user = freshUser();
    const created = await k.req('POST', '/apikeys/jwt', {
      headers: await k.bearer(user),
      body: { name: 'v', level: 3, expiresIn: 3600, allowedIps },
    });
    expect(created.status).toBe(400);
    expect(created.json.error).toContain(named);
  });
});

describe('the verdict order', () => {
  it('gives the earlier code to a key failing several checks', async () => {
    const user = freshUser();
    const key = await newKey({ allowedIps: ['10.0.0.0/8'], permissions: ['a'], level: 2 }, user);
    const all = { clientIp: '192.0.2.1', minLevel: 5, permissions: 'b' };
    expect((await verifyKey(key, all)).json.code).toBe('IP_NOT_ALLOWED');
    expect((await verifyKey(key, { ...all, clientIp: '10.1.2.3' })).json.code).toBe('INSUFFICIENT_LEVEL');
    expect((await verifyKey(key, { ...all, clientIp: '10.1.2.3', minLevel: 2 })).json.code).toBe(
      'INSUFFICIENT_PERMISSIONS',
    );
    await k.req('PATCH', `/apikeys/${key.key}/jwt`, {
      headers: await k.bearer(user),
      body: { enabled: false },
    });
    expect((await verifyKey(key, all)).json.code).toBe('DISABLED');
    expect(
      (
        await verify({
          key: key.key,
          secret: `${key.secret.slice(0, -1)}${key.secret.endsWith('x') ? 'y' : 'x'}`,
          ...all,
        })
      ).json.code,
    ).toBe('NOT_FOUND');
  });

  it('uses no rate limit and no credit for a refusal of permissions or address', async () => {
    const key = await newKey({
      permissions: ['a'],
      allowedIps: ['10.0.0.0/8'],
      ratelimit: { limit: 2, duration: 60 },
      credits: { remaining: 2 },
    });
    for (let i = 0; i < 5; i++) {
      expect((await verifyKey(key, { clientIp: '10.0.0.1', permissions: 'b' })).json.code).toBe(
        'INSUFFICIENT_PERMISSIONS',
      );
      expect((await verifyKey(key, { clientIp: '192.0.2.1' })).json.code).toBe('IP_NOT_ALLOWED');
    }
    const valid = await verifyKey(key, { clientIp: '10.0.0.1', permissions: 'a' });
    expect(valid.json).toMatchObject({
      code: 'VALID',
      ratelimit: { remaining: 1 },
      credits: { remaining: 1 },
    });
  });

  it('counts both refusals as denied in the usage history', async () => {
    const user = freshUser();
    const key = await newKey({ permissions: ['a'], allowedIps: ['10.0.0.0/8'] }, user);
    await verifyKey(key, { clientIp: '10.0.0.1', permissions: 'b' });
    await verifyKey(key, { clientIp: '192.0.2.1' });
    await verifyKey(key, { clientIp: '10.0.0.1', permissions: 'a' });
    await k.usageTick();
    const usage = await k.req('GET', `/apikeys/${key.key}/usage/jwt`, { headers: await k.bearer(user) });
    expect(usage.json.usage).toEqual([expect.objectContaining({ valid: 1, denied: 2 })]);
  });
});

describe("verify's limit answers", () => {
  it('gives the window in ratelimit.duration', async () => {
    const key = await newKey({ ratelimit: { limit: 5, duration: 30 } });
    expect((await verifyKey(key)).json.ratelimit).toMatchObject({ limit: 5, duration: 30, remaining: 4 });
  });

  it('gives USAGE_EXCEEDED a retryAfter when a refill will come, and none without one', async () => {
    const refilled = await newKey({ credits: { remaining: 0, refill: { amount: 5, interval: 90 } } });
    k.time.now += 30_000;
    const answer = await verifyKey(refilled);
    expect(answer.json).toMatchObject({ code: 'USAGE_EXCEEDED', retryAfter: 60 });
    const once = await newKey({ credits: { remaining: 0 } });
    const never = await verifyKey(once);
    expect(never.json.code).toBe('USAGE_EXCEEDED');
    expect(Object.keys(never.json)).not.toContain('retryAfter');
  });
});
