// Permissions on keys: the property on create, update, rotate, key info and the principal, on
// both schemes and /admin; and the grant rules: nobody grants what it does not hold, a key updating
// itself only narrows, the user policy's permissions bind every grant but the operator's. Every
// refusal is checked to have changed nothing. On both engines (KEYGATE_TEST_DATABASE=postgres).
import { afterAll, beforeAll, describe, expect, it } from 'bun:test';
import { type TestKeygate, testKeygate } from '../support/keygate';

let k: TestKeygate;
beforeAll(async () => {
  k = await testKeygate();
});
afterAll(() => k.close());

let nextUser = 7000;
const freshUser = () => nextUser++;

async function create(headers: Record<string, string>, body: Record<string, unknown>, scheme = 'jwt') {
  return k.req('POST', `/apikeys/${scheme}`, {
    headers,
    body: { name: 'p', level: 3, expiresIn: 3600, ...body },
  });
}
const info = async (id: string, user: number) =>
  (await k.req('GET', `/apikeys/${id}/jwt`, { headers: await k.bearer(user) })).json.apikey;
const countKeys = async (user: number) =>
  (await k.req('GET', '/apikeys/jwt', { headers: await k.bearer(user) })).json.apikeys.length;
const putPolicy = async (user: number, body: Record<string, unknown>) =>
  k.req('PUT', `/admin/users/${user}/policy`, {
    headers: await k.operator(),
    body: { ratelimit: null, credits: null, maxKeys: null, maxLevel: null, ...body },
  });

describe('permissions on create and in key info', () => {
  it('answers them on create and shows them in get, list and the verify principal', async () => {
    const user = freshUser();
    const permissions = ['documents.read', 'billing.*', 'repo/x-y:write'];
    const created = await create(await k.bearer(user), { permissions });
    expect(created.status).toBe(201);
    expect(created.json.apikey.permissions).toEqual(permissions);
    expect((await info(created.json.apikey.key, user)).permissions).toEqual(permissions);
    const listed = (await k.req('GET', '/apikeys/jwt', { headers: await k.bearer(user) })).json.apikeys;
    expect(listed[0].permissions).toEqual(permissions);
    const verified = await k.req('POST', '/apikeys/verify', {
      body: { key: created.json.apikey.key, secret: created.json.apikey.secret },
    });
    expect(verified.json.principal.permissions).toEqual(permissions);
  });

  it('leaves them out of key info and the principal when the key has none', async () => {
    const user = freshUser();
    const created = (await create(await k.bearer(user), {})).json.apikey;
    expect(created.permissions).toBeUndefined();
    expect(Object.keys(await info(created.key, user))).not.toContain('permissions');
    const verified = await k.req('POST', '/apikeys/verify', {
      body: { key: created.key, secret: created.secret },
    });
    expect(Object.keys(verified.json.principal)).not.toContain('permissions');
  });

  it.each([
    [[], 'permissions'],
    [Array.from({ length: 101 }, (_, i) => `p${i}`), 'permissions'],
    [['a', 'a'], 'permissions'],
    [['docs.**'], 'docs.**'],
    [['has space'], 'has space'],
    [['*.read'], '*.read'],
    [['x'.repeat(129)], 'permissions'],
    ['documents.read', 'permissions'],
    [[42], 'permissions'],
  ])('refuses permissions %j with a 400 that says what is wrong (%s)', async (permissions, named) => {
    const user = freshUser();
    const created = await create(await k.bearer(user), { permissions });
    expect(created.status).toBe(400);
    expect(created.json.error).toContain(named.slice(0, 20));
    expect(await countKeys(user)).toBe(0);
  });

  it('accepts 100 distinct permissions of 128 characters, and * alone', async () => {
    const user = freshUser();
    const many = Array.from({ length: 100 }, (_, i) => `${String(i).padStart(3, '0')}${'x'.repeat(125)}`);
    expect((await create(await k.bearer(user), { permissions: many })).status).toBe(201);
    expect((await create(await k.bearer(user), { permissions: ['*'] })).status).toBe(201);
  });
});

describe('nobody grants what it does not hold', () => {
  it('lets a token grant any permission when the user has no policy', async () => {
    const user = freshUser();
    expect((await create(await k.bearer(user), { permissions: ['*'] })).status).toBe(201);
  });

  it('lets a key grant only what its own permissions cover, wildcards included', async () => {
    const user = freshUser();
    const parent = (await create(await k.bearer(user), { permissions: ['documents.*', 'billing.read'] })).json
      .apikey;
    const asParent = k.basic(parent.key, parent.secret);
    for (const granted of [
      ['documents.read'],
      ['documents.comments.write'],
      ['documents.*'],
      ['billing.read'],
    ]) {
      expect((await create(asParent, { permissions: granted }, 'key')).status).toBe(201);
    }
    const before = await countKeys(user);
    for (const granted of [
      ['documents'],
      ['billing.write'],
      ['billing.*'],
      ['*'],
      ['documents.read', 'admin'],
    ]) {
      const refused = await create(asParent, { permissions: granted }, 'key');
      expect(refused.status).toBe(403);
      expect(refused.json.error).toContain('grant');
    }
    expect(await countKeys(user)).toBe(before);
  });

  it('lets a key without permissions grant none, but create keys without permissions', async () => {
    const user = freshUser();
    const plain = (await create(await k.bearer(user), {})).json.apikey;
    const asPlain = k.basic(plain.key, plain.secret);
    expect((await create(asPlain, { permissions: ['a'] }, 'key')).status).toBe(403);
    expect((await create(asPlain, {}, 'key')).status).toBe(201);
  });

  it('refuses a key updating a sibling with permissions it does not hold, and changes nothing', async () => {
    const user = freshUser();
    const caller = (await create(await k.bearer(user), { permissions: ['documents.read'] })).json.apikey;
    const sibling = (await create(await k.bearer(user), { permissions: ['documents.read'] })).json.apikey;
    const refused = await k.req('PATCH', `/apikeys/${sibling.key}/key`, {
      headers: k.basic(caller.key, caller.secret),
      body: { permissions: ['documents.write'], name: 'renamed' },
    });
    expect(refused.status).toBe(403);
    expect(await info(sibling.key, user)).toMatchObject({ name: 'p', permissions: ['documents.read'] });
    const allowed = await k.req('PATCH', `/apikeys/${sibling.key}/key`, {
      headers: k.basic(caller.key, caller.secret),
      body: { permissions: null },
    });
    expect(allowed.status).toBe(200);
    expect(allowed.json.apikey.permissions).toBeUndefined();
  });

  it('lets a key updating itself only narrow its permissions', async () => {
    const user = freshUser();
    const self = (await create(await k.bearer(user), { permissions: ['documents.*', 'billing.read'] })).json
      .apikey;
    const asSelf = k.basic(self.key, self.secret);
    const widen = await k.req('PATCH', `/apikeys/${self.key}/key`, {
      headers: asSelf,
      body: { permissions: ['documents.*', 'billing.*'] },
    });
    expect(widen.status).toBe(403);
    expect((await info(self.key, user)).permissions).toEqual(['documents.*', 'billing.read']);
    const narrow = await k.req('PATCH', `/apikeys/${self.key}/key`, {
      headers: asSelf,
      body: { permissions: ['documents.read'] },
    });
    expect(narrow.status).toBe(200);
    expect(narrow.json.apikey.permissions).toEqual(['documents.read']);
    const none = await k.req('PATCH', `/apikeys/${self.key}/key`, {
      headers: asSelf,
      body: { permissions: null },
    });
    expect(none.status).toBe(200);
    expect(none.json.apikey.permissions).toBeUndefined();
  });

  it('copies permissions on rotation, and refuses a key rotating a sibling that holds more than it', async () => {
    const user = freshUser();
    const small = (await create(await k.bearer(user), { permissions: ['documents.read'] })).json.apikey;
    const big = (await create(await k.bearer(user), { permissions: ['documents.*'] })).json.apikey;
    const refused = await k.req('POST', `/apikeys/${big.key}/rotate/key`, {
      headers: k.basic(small.key, small.secret),
    });
    expect(refused.status).toBe(403);
    expect((await info(big.key, user)).permissions).toEqual(['documents.*']);
    const rotated = await k.req('POST', `/apikeys/${small.key}/rotate/key`, {
      headers: k.basic(big.key, big.secret),
    });
    expect(rotated.status).toBe(201);
    expect(rotated.json.apikey.permissions).toEqual(['documents.read']);
    expect((await info(rotated.json.apikey.key, user)).permissions).toEqual(['documents.read']);
  });

  it('lets the operator grant anything, whatever the policy', async () => {
    const user = freshUser();
    expect((await putPolicy(user, { permissions: ['documents.read'] })).status).toBe(200);
    const created = await k.req('POST', `/admin/users/${user}/apikeys`, {
      headers: await k.operator(),
      body: { name: 'op', level: 8, expiresIn: 3600, permissions: ['*'] },
    });
    expect(created.status).toBe(201);
    expect(created.json.apikey.permissions).toEqual(['*']);
    const updated = await k.req('PATCH', `/admin/apikeys/${created.json.apikey.key}`, {
      headers: await k.operator(),
      body: { permissions: ['admin.*'] },
    });
    expect(updated.status).toBe(200);
    expect(updated.json.apikey.permissions).toEqual(['admin.*']);
  });
});

describe("the user policy's permissions", () => {
  it('shows all five properties, permissions null when the PUT left it out', async () => {
    const user = freshUser();
    const put = await putPolicy(user, {});
    expect(put.json.policy).toEqual({
      ratelimit: null,
      credits: null,
      maxKeys: null,
      maxLevel: null,
      permissions: null,
    });
    const got = await k.req('GET', `/admin/users/${user}/policy`, { headers: await k.operator() });
    expect(got.json.policy.permissions).toBeNull();
    const none = await k.req('GET', `/admin/users/${freshUser()}/policy`, { headers: await k.operator() });
    expect(none.json.policy).toEqual({
      ratelimit: null,
      credits: null,
      maxKeys: null,
      maxLevel: null,
      permissions: null,
    });
  });

  it('refuses a bad permissions list in a policy with a 400', async () => {
    const user = freshUser();
    for (const permissions of [[], ['a b'], 'x', [1]]) {
      const put = await putPolicy(user, { permissions });
      expect(put.status).toBe(400);
    }
  });

  it('binds tokens and keys: every granted permission covered by one of the policy', async () => {
    const user = freshUser();
    const parent = (await create(await k.bearer(user), { permissions: ['*'] })).json.apikey;
    expect((await putPolicy(user, { permissions: ['documents.*'] })).json.policy.permissions).toEqual([
      'documents.*',
    ]);
    const before = await countKeys(user);
    for (const headers of [await k.bearer(user), k.basic(parent.key, parent.secret)]) {
      const scheme = 'authorization' in headers && headers.authorization.startsWith('Bearer') ? 'jwt' : 'key';
      expect(
        (await create(headers, { permissions: ['documents.read', 'documents.x.y'] }, scheme)).status,
      ).toBe(201);
      const refused = await create(headers, { permissions: ['billing.read'] }, scheme);
      expect(refused.status).toBe(403);
      expect(refused.json.error).toContain('policy');
    }
    expect(await countKeys(user)).toBe(before + 2);
  });

  it('keeps a key created before a narrower policy as it is, and verify checks only what it holds', async () => {
    const user = freshUser();
    const wide = (await create(await k.bearer(user), { permissions: ['billing.read'] })).json.apikey;
    await putPolicy(user, { permissions: ['documents.*'] });
    expect((await info(wide.key, user)).permissions).toEqual(['billing.read']);
    const verified = await k.req('POST', '/apikeys/verify', {
      body: { key: wide.key, secret: wide.secret, permissions: 'billing.read' },
    });
    expect(verified.json.code).toBe('VALID');
  });

  it('makes a rotation and a narrowing self-update grants: both refused beyond the policy', async () => {
    const user = freshUser();
    const wide = (await create(await k.bearer(user), { permissions: ['billing.read', 'billing.write'] })).json
      .apikey;
    await putPolicy(user, { permissions: ['documents.*'] });
    const rotated = await k.req('POST', `/apikeys/${wide.key}/rotate/jwt`, { headers: await k.bearer(user) });
    expect(rotated.status).toBe(403);
    const narrowed = await k.req('PATCH', `/apikeys/${wide.key}/key`, {
      headers: k.basic(wide.key, wide.secret),
      body: { permissions: ['billing.read'] },
    });
    expect(narrowed.status).toBe(403);
    expect((await info(wide.key, user)).permissions).toEqual(['billing.read', 'billing.write']);
  });

  it('counts a rotation as a create for maxLevel: a key above it cannot be rotated', async () => {
    const user = freshUser();
    const high = (await create(await k.bearer(user), { level: 6 })).json.apikey;
    await putPolicy(user, { maxLevel: 4 });
    const rotated = await k.req('POST', `/apikeys/${high.key}/rotate/jwt`, {
      headers: await k.bearer(user),
      body: { gracePeriod: 60 },
    });
    expect(rotated.status).toBe(403);
    expect(rotated.json.error).toContain('4');
    expect(await info(high.key, user)).toMatchObject({ level: 6, expiresAt: high.expiresAt });
    expect(await countKeys(user)).toBe(1);
  });
});

describe('the audit line of an update', () => {
  it('names permissions in changed', async () => {
    const user = freshUser();
    const key = (await create(await k.bearer(user), {})).json.apikey;
    await k.req('PATCH', `/apikeys/${key.key}/jwt`, {
      headers: await k.bearer(user),
      body: { permissions: ['documents.read'] },
    });
    const line = k.logLines('apikey.updated').find((entry) => entry.key === key.key);
    expect(line.changed).toEqual(['permissions']);
  });
});
