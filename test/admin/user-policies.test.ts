// User policies: PUT, GET and DELETE /admin/users/:userId/policy (the operator only), maxKeys in
// place of MAX_KEYS_PER_USER, maxLevel on every route, the policy shown read-only in key info, and
// no owner's route that can change it. The policy's credits are a pool the guarded take can draw on.
import { afterEach, beforeEach, describe, expect, it } from 'bun:test';
import { PgDialect } from 'drizzle-orm/pg-core';
import { SQLiteSyncDialect } from 'drizzle-orm/sqlite-core';
import { takeCreditsStatement } from '../../src/db/credits-take';
import { type TestKeygate, testKeygate } from '../support/keygate';
import { rawQuery } from '../support/raw-query';

let k: TestKeygate;
beforeEach(async () => {
  k = await testKeygate({ MAX_KEYS_PER_USER: '3' });
});
afterEach(() => k.close());

const POLICY = {
  ratelimit: { limit: 100, duration: 60 },
  credits: { remaining: 500, refill: { amount: 500, interval: 86_400 } },
  maxKeys: 5,
  maxLevel: 4,
};
/** A policy as answers show it: the four put, and permissions, null when the PUT left it out. */
const SHOWN = { ...POLICY, permissions: null };
const NONE = { ratelimit: null, credits: null, maxKeys: null, maxLevel: null, permissions: null };

const put = async (userId: number, body: unknown) =>
  k.req('PUT', `/admin/users/${userId}/policy`, { headers: await k.operator('ops'), body });

describe('who may use the policy routes', () => {
  const cases: Array<[string, () => Promise<Record<string, string>>, number]> = [
    ['a user’s token', () => k.bearer(42, 8), 403],
    [
      'a user’s key',
      async () => {
        const key = await k.createKey(42, { level: 8 });
        return k.basic(key.key, key.secret);
      },
      401,
    ],
    ['no credential', async () => ({}), 401],
  ];
  it.each(cases)('%s gets %d on PUT, GET and DELETE', async (_, headers, status) => {
    for (const method of ['PUT', 'GET', 'DELETE']) {
      const response = await k.req(method, '/admin/users/42/policy', {
        headers: await headers(),
        body: method === 'PUT' ? POLICY : undefined,
      });
      expect(response.status).toBe(status);
    }
    const stored = await k.req('GET', '/admin/users/42/policy', { headers: await k.operator() });
    expect(stored.json.policy).toEqual(NONE);
  });
});

describe('PUT, GET and DELETE /admin/users/:userId/policy', () => {
  it('puts, shows and removes a policy, audited as the operator', async () => {
    const headers = await k.operator('ops');
    const none = await k.req('GET', '/admin/users/42/policy', { headers });
    expect(none.json).toEqual({ result: 'success', policy: NONE });

    const set = await put(42, POLICY);
    expect(set.status).toBe(200);
    expect(set.json).toEqual({ result: 'success', policy: SHOWN });
    expect((await k.req('GET', '/admin/users/42/policy', { headers })).json).toEqual(set.json);
    expect((await k.req('GET', '/admin/users/7/policy', { headers })).json.policy).toEqual(NONE);

    const replaced = await put(42, { ...NONE, maxLevel: 2 });
    expect(replaced.json.policy).toEqual({ ...NONE, maxLevel: 2 });

    const removed = await k.req('DELETE', '/admin/users/42/policy', { headers });
    expect(removed.status).toBe(204);
    expect(removed.text).toBe('');
    expect((await k.req('GET', '/admin/users/42/policy', { headers })).json.policy).toEqual(NONE);
    expect((await k.req('DELETE', '/admin/users/42/policy', { headers })).status).toBe(404);

    expect(k.logLines('policy.set')).toEqual([
      expect.objectContaining({ userId: 42, by: 'admin:ops' }),
      expect.objectContaining({ userId: 42, by: 'admin:ops' }),
    ]);
    expect(k.logLines('policy.deleted')).toEqual([expect.objectContaining({ userId: 42, by: 'admin:ops' })]);
  });

  it.each([
    ['a missing property', { ratelimit: null, credits: null, maxKeys: null }],
    ['an extra property', { ...NONE, owner: 1 }],
    ['maxKeys 0', { ...NONE, maxKeys: 0 }],
    ['maxKeys above 1000000', { ...NONE, maxKeys: 1_000_001 }],
    ['maxKeys as text', { ...NONE, maxKeys: '5' }],
    ['maxLevel 9', { ...NONE, maxLevel: 9 }],
    ['maxLevel 1.5', { ...NONE, maxLevel: 1.5 }],
    ['a rate limit of 0', { ...NONE, ratelimit: { limit: 0, duration: 60 } }],
    ['credits with an unknown property', { ...NONE, credits: { remaining: 1, extra: 1 } }],
    ['an array', []],
    ['null', null],
  ])('answers 400 for %s', async (_, body) => {
    const response = await put(42, body);
    expect(response.status).toBe(400);
    expect(response.json).toEqual({ result: 'error', error: expect.any(String) });
  });

  it('answers 400 for a body that is not JSON, and for a bad user id', async () => {
    expect((await put(42, '{')).status).toBe(400);
    expect((await put(-1 as number, NONE)).status).toBe(400);
  });
});

describe('maxKeys', () => {
  it('replaces MAX_KEYS_PER_USER for that user only, both ways', async () => {
    await put(42, { ...NONE, maxKeys: 5 });
    for (let i = 0; i < 5; i++) await k.createKey(42);
    const refused = await k.req('POST', '/apikeys/jwt', {
      headers: await k.bearer(42),
      body: { name: 'sixth', level: 1, expiresIn: 60 },
    });
    expect(refused.status).toBe(409);
    expect(refused.json.error).toContain('5');

    await put(7, { ...NONE, maxKeys: 1 });
    await k.createKey(7);
    const capped = await k.req('POST', '/admin/users/7/apikeys', {
      headers: await k.operator(),
      body: { name: 'second', level: 1, expiresIn: 60 },
    });
    expect(capped.status).toBe(409);
    // Others keep MAX_KEYS_PER_USER (3).
    for (let i = 0; i < 3; i++) await k.createKey(9);
    await expect(k.createKey(9)).rejects.toThrow('409');
  });

  it('caps a rotation with a grace period too', async () => {
    await put(42, { ...NONE, maxKeys: 1 });
    const key = await k.createKey(42);
    const rotated = await k.req('POST', `/apikeys/${key.key}/rotate/jwt`, {
      headers: await k.bearer(42),
      body: { gracePeriod: 60 },
    });
    expect(rotated.status).toBe(409);
  });
});

describe('maxLevel', () => {
  it('refuses creating or updating a key above it on every route, and allows it at or below', async () => {
    await put(42, { ...NONE, maxLevel: 3 });
    const owner = await k.bearer(42, 8);
    const create = (level: number, headers: Record<string, string>, path = '/apikeys/jwt') =>
      k.req('POST', path, { headers, body: { name: 'x', level, expiresIn: 60 } });
    expect((await create(4, owner)).status).toBe(403);
    expect((await create(4, await k.operator(), '/admin/users/42/apikeys')).status).toBe(403);
    const atCap = await create(3, owner);
    expect(atCap.status).toBe(201);
    const { key } = atCap.json.apikey;
    expect((await k.req('PATCH', `/apikeys/${key}/jwt`, { headers: owner, body: { level: 4 } })).status).toBe(
      403,
    );
    const admin = await k.req('PATCH', `/admin/apikeys/${key}`, {
      headers: await k.operator(),
      body: { level: 4 },
    });
    expect(admin.status).toBe(403);
    expect((await k.req('PATCH', `/apikeys/${key}/jwt`, { headers: owner, body: { level: 2 } })).status).toBe(
      200,
    );
    // Other users are not capped.
    expect((await create(8, await k.bearer(7, 8))).status).toBe(201);
  });
});

describe('the policy in key info', () => {
  it('is shown read-only in list, get and update when the user has one, and absent otherwise', async () => {
    const key = await k.createKey(42);
    const other = await k.createKey(7);
    await put(42, POLICY);
    const owner = await k.bearer(42);
    const list = await k.req('GET', '/apikeys/jwt', { headers: owner });
    expect(list.json.apikeys[0].policy).toEqual(SHOWN);
    expect((await k.req('GET', `/apikeys/${key.key}/jwt`, { headers: owner })).json.apikey.policy).toEqual(
      SHOWN,
    );
    const updated = await k.req('PATCH', `/apikeys/${key.key}/jwt`, {
      headers: owner,
      body: { name: 'renamed' },
    });
    expect(updated.json.apikey.policy).toEqual(SHOWN);
    const admin = await k.req('GET', `/admin/apikeys/${key.key}`, { headers: await k.operator() });
    expect(admin.json.apikey.policy).toEqual(SHOWN);
    const viaKey = await k.req('GET', `/apikeys/${key.key}/key`, { headers: k.basic(key.key, key.secret) });
    expect(viaKey.json.apikey.policy).toEqual(SHOWN);
    const otherInfo = await k.req('GET', `/apikeys/${other.key}/jwt`, { headers: await k.bearer(7) });
    expect(Object.keys(otherInfo.json.apikey)).not.toContain('policy');

    await k.req('DELETE', '/admin/users/42/policy', { headers: await k.operator() });
    const after = await k.req('GET', `/apikeys/${key.key}/jwt`, { headers: owner });
    expect(Object.keys(after.json.apikey)).not.toContain('policy');
  });

  it('cannot be changed by the owner: no owner body takes it', async () => {
    const key = await k.createKey(42);
    await put(42, POLICY);
    for (const [path, headers] of [
      [`/apikeys/${key.key}/jwt`, await k.bearer(42)],
      [`/apikeys/${key.key}/key`, k.basic(key.key, key.secret)],
    ] as const) {
      const response = await k.req('PATCH', path, { headers, body: { policy: NONE } });
      expect(response.status).toBe(400);
    }
    const create = await k.req('POST', '/apikeys/jwt', {
      headers: await k.bearer(42),
      body: { name: 'x', level: 1, expiresIn: 60, policy: NONE },
    });
    expect(create.status).toBe(400);
    expect(
      (await k.req('GET', '/admin/users/42/policy', { headers: await k.operator() })).json.policy,
    ).toEqual(SHOWN);
  });
});

describe('policyOf, for the verifier', () => {
  it('answers from memory once known, and sees a change at once', async () => {
    const { policies } = k.keygate;
    expect(await policies.policyOf(42)).toBeUndefined();
    expect(policies.policyOf(42)).toBeUndefined(); // known: no promise
    await put(42, { ...NONE, maxLevel: 2 });
    expect(await policies.policyOf(42)).toMatchObject({ maxLevel: 2, maxKeys: null });
    expect(policies.policyOf(42)).toMatchObject({ maxLevel: 2 });
    await k.req('DELETE', '/admin/users/42/policy', { headers: await k.operator() });
    expect(await policies.policyOf(42)).toBeUndefined();
  });

  it('holds credits the guarded take draws on, in user_credits', async () => {
    await put(42, { ...NONE, credits: { remaining: 2 } });
    const dialect = k.keygate.engine === 'postgres' ? new PgDialect() : new SQLiteSyncDialect();
    const columns = {
      table: 'user_credits',
      id: 'user_id',
      remaining: 'remaining',
      refillAmount: 'refill_amount',
      refillIntervalMs: 'refill_interval_ms',
      refilledAt: 'refilled_at',
    };
    const take = async () => {
      const query = dialect.sqlToQuery(takeCreditsStatement({ id: '42', cost: 1, now: k.time.now }, columns));
      return rawQuery(
        k.keygate,
        query.sql.replace(/\?/g, () => `$${++n}`),
        query.params,
      );
    };
    let n = 0;
    expect((await take()).map((row) => Number(row.remaining))).toEqual([1]);
    n = 0;
    expect((await take()).map((row) => Number(row.remaining))).toEqual([0]);
    n = 0;
    expect(await take()).toEqual([]);
    const shown = await k.req('GET', '/admin/users/42/policy', { headers: await k.operator() });
    expect(shown.json.policy.credits).toEqual({ remaining: 0 });
  });
});
