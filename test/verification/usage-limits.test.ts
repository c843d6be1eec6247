// Rate limits and credits as verify and forward-auth apply them: the burst rule, the whole limit back
// after a duration, the answers' fields and headers, credits taken last with `cost`, refills that set,
// the order of verdicts, the operator's RATE_LIMIT, one limit and one pool for a key and its
// successor, and what a refusal leaves untouched. On an injected clock; on both engines
// (KEYGATE_TEST_DATABASE=postgres).
import { afterAll, beforeAll, describe, expect, it } from 'bun:test';
import { START, type TestKeygate, testKeygate } from '../support/keygate';

let k: TestKeygate;
let operator: TestKeygate;
beforeAll(async () => {
  [k, operator] = await Promise.all([testKeygate(), testKeygate({ RATE_LIMIT: '3/60' })]);
});
afterAll(async () => {
  await Promise.all([k.close(), operator.close()]);
});

type Key = { key: string; secret: string };
let nextUser = 100;

async function create(on: TestKeygate, settings: Record<string, unknown>, level = 3): Promise<Key> {
  const response = await on.req('POST', '/apikeys/jwt', {
    headers: await on.bearer(nextUser++),
    body: { name: 'limited', level, expiresIn: 3600, ...settings },
  });
  if (response.status !== 201) throw new Error(`create failed: ${response.status} ${response.text}`);
  return response.json.apikey;
}

const verify = (on: TestKeygate, key: Key, extra: Record<string, unknown> = {}) =>
  on.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret, ...extra } });

const forwardAuth = (on: TestKeygate, key: Key, query = '') =>
  on.req('GET', `/forward-auth${query}`, { headers: { 'x-api-key': key.key, 'x-api-secret': key.secret } });

/** The codes of `n` verifications in a row. */
async function codes(on: TestKeygate, key: Key, n: number, extra: Record<string, unknown> = {}) {
  const answers: string[] = [];
  for (let i = 0; i < n; i++) answers.push((await verify(on, key, extra)).json.code);
  return answers;
}

const iso = (ms: number) => new Date(ms).toISOString();

describe('a key with its own rate limit', () => {
  it('gives a burst of limit + k exactly limit VALID, and the whole limit back a duration later', async () => {
    const key = await create(k, { ratelimit: { limit: 3, duration: 60 } });
    expect(await codes(k, key, 5)).toEqual(['VALID', 'VALID', 'VALID', 'RATE_LIMITED', 'RATE_LIMITED']);
    k.time.now += 59_999;
    expect(await codes(k, key, 1)).toEqual(['RATE_LIMITED']);
    k.time.now += 60_000;
    expect(await codes(k, key, 4)).toEqual(['VALID', 'VALID', 'VALID', 'RATE_LIMITED']);
  });

  it('reports limit, remaining and reset on VALID, and retryAfter on RATE_LIMITED', async () => {
    const key = await create(k, { ratelimit: { limit: 2, duration: 10 } });
    const now = k.time.now;
    const first = (await verify(k, key)).json;
    expect(first).toMatchObject({ valid: true, code: 'VALID' });
    expect(first.ratelimit).toEqual({
      limit: 2,
      duration: 10,
      remaining: 1,
      reset: iso(now + 10_000),
      scope: 'key',
    });
    expect((await verify(k, key)).json.ratelimit.remaining).toBe(0);
    k.time.now += 4_000;
    const refused = (await verify(k, key)).json;
    expect(refused).toEqual({
      result: 'success',
      valid: false,
      code: 'RATE_LIMITED',
      principal: expect.objectContaining({ type: 'key', key: key.key }),
      ratelimit: { limit: 2, duration: 10, remaining: 0, reset: iso(now + 10_000), scope: 'key' },
      retryAfter: 6,
    });
  });

  it('counts only VALID answers: a refusal for the level or a disabled key uses none of it', async () => {
    const key = await create(k, { ratelimit: { limit: 1, duration: 60 } }, 2);
    expect((await verify(k, key, { minLevel: 5 })).json.code).toBe('INSUFFICIENT_LEVEL');
    expect((await forwardAuth(k, key, '?minLevel=5')).status).toBe(403);
    expect((await verify(k, key, { secret: 'x'.repeat(key.secret.length) })).json.code).toBe('NOT_FOUND');
    expect(await codes(k, key, 2)).toEqual(['VALID', 'RATE_LIMITED']);
  });

  it('starts its counts afresh when the limit is replaced, and is unlimited once it is removed', async () => {
    const key = await create(k, { ratelimit: { limit: 1, duration: 60 } });
    const headers = await k.bearer(nextUser - 1);
    expect(await codes(k, key, 2)).toEqual(['VALID', 'RATE_LIMITED']);
    const same = { ratelimit: { limit: 1, duration: 60 } };
    expect((await k.req('PATCH', `/apikeys/${key.key}/jwt`, { headers, body: same })).status).toBe(200);
    expect(await codes(k, key, 2)).toEqual(['VALID', 'RATE_LIMITED']);
    const removed = { ratelimit: null };
    expect((await k.req('PATCH', `/apikeys/${key.key}/jwt`, { headers, body: removed })).status).toBe(200);
    const answers = await Promise.all([1, 2, 3].map(() => verify(k, key)));
    expect(answers.map((answer) => answer.json)).toEqual(
      answers.map(() => expect.not.objectContaining({ ratelimit: expect.anything() })),
    );
    expect(answers.map((answer) => answer.json.code)).toEqual(['VALID', 'VALID', 'VALID']);
  });

  it('does not limit tokens', async () => {
    const token = await operator.token(7);
    for (let i = 0; i < 5; i++) {
      const answer = await operator.req('POST', '/apikeys/verify', { body: { token, cost: 5 } });
      expect(answer.json).toMatchObject({ valid: true, code: 'VALID' });
      expect(answer.json.ratelimit).toBeUndefined();
    }
  });
});

describe('the operator’s RATE_LIMIT', () => {
  it('applies to every key, and the limit with the fewer remaining is reported', async () => {
    const plain = await create(operator, {});
    const first = (await verify(operator, plain)).json;
    expect(first.ratelimit).toMatchObject({ limit: 3, remaining: 2, scope: 'operator' });
    expect(await codes(operator, plain, 3)).toEqual(['VALID', 'VALID', 'RATE_LIMITED']);

    const own = await create(operator, { ratelimit: { limit: 10, duration: 1 } });
    expect((await verify(operator, own)).json.ratelimit).toMatchObject({
      limit: 3,
      remaining: 2,
      scope: 'operator',
    });
    const tight = await create(operator, { ratelimit: { limit: 1, duration: 60 } });
    expect((await verify(operator, tight)).json.ratelimit).toMatchObject({
      limit: 1,
      remaining: 0,
      scope: 'key',
    });
    expect((await verify(operator, tight)).json).toMatchObject({
      code: 'RATE_LIMITED',
      ratelimit: { scope: 'key' },
    });
  });

  it('passes a verification only when both limits allow it, and counts it on both', async () => {
    const key = await create(operator, { ratelimit: { limit: 2, duration: 1 } });
    expect(await codes(operator, key, 3)).toEqual(['VALID', 'VALID', 'RATE_LIMITED']);
    operator.time.now += 1_000;
    // The key's own limit is whole again; the operator's has one left of three.
    expect(await codes(operator, key, 3)).toEqual(['VALID', 'RATE_LIMITED', 'RATE_LIMITED']);
  });
});

describe('credits', () => {
  it('takes cost from remaining, answers USAGE_EXCEEDED when it does not cover cost, and takes cost 0', async () => {
    const key = await create(k, { credits: { remaining: 3 } });
    expect((await verify(k, key, { cost: 2 })).json).toMatchObject({
      valid: true,
      code: 'VALID',
      credits: { remaining: 1, scope: 'key' },
    });
    expect((await verify(k, key, { cost: 2 })).json).toEqual({
      result: 'success',
      valid: false,
      code: 'USAGE_EXCEEDED',
      principal: expect.objectContaining({ key: key.key }),
      credits: { remaining: 1, scope: 'key' },
    });
    expect((await verify(k, key, { cost: 0 })).json.credits).toEqual({ remaining: 1, scope: 'key' });
    expect((await verify(k, key)).json.credits).toEqual({ remaining: 0, scope: 'key' });
    expect((await verify(k, key)).json.code).toBe('USAGE_EXCEEDED');
    const info = await k.req('GET', `/apikeys/${key.key}/jwt`, { headers: await k.bearer(nextUser - 1) });
    expect(info.json.apikey.credits).toEqual({ remaining: 0 });
  });

  it('refills by setting remaining to amount every interval from when the credits were set', async () => {
    const key = await create(k, { credits: { remaining: 1, refill: { amount: 5, interval: 10 } } });
    const set = k.time.now;
    expect((await verify(k, key)).json.credits.remaining).toBe(0);
    expect((await verify(k, key)).json.code).toBe('USAGE_EXCEEDED');
    k.time.now = set + 25_000;
    expect((await verify(k, key)).json.credits.remaining).toBe(4);
    k.time.now = set + 30_000;
    // Set, not added: 5 again, then the take.
    expect((await verify(k, key, { cost: 5 })).json.credits.remaining).toBe(0);
  });

  it('are taken last: a rate-limited verification takes none, and a refusal for credits gives the limit back', async () => {
    const key = await create(k, { ratelimit: { limit: 2, duration: 60 }, credits: { remaining: 10 } });
    expect(await codes(k, key, 4)).toEqual(['VALID', 'VALID', 'RATE_LIMITED', 'RATE_LIMITED']);
    k.time.now += 60_000;
    expect((await verify(k, key)).json.credits.remaining).toBe(7);

    const poor = await create(k, { ratelimit: { limit: 2, duration: 60 }, credits: { remaining: 1 } });
    expect((await verify(k, poor)).json.ratelimit.remaining).toBe(1);
    expect((await verify(k, poor, { cost: 5 })).json.code).toBe('USAGE_EXCEEDED');
    // The refused verification used no part of the limit: one is still left.
    expect((await verify(k, poor, { cost: 0 })).json).toMatchObject({
      code: 'VALID',
      ratelimit: { remaining: 0 },
    });
  });

  it('come after every other refusal: order EXPIRED, DISABLED, INSUFFICIENT_LEVEL, RATE_LIMITED, USAGE_EXCEEDED', async () => {
    const headers = () => k.bearer(nextUser - 1);
    const key = await create(k, { ratelimit: { limit: 1, duration: 60 }, credits: { remaining: 0 } }, 2);
    expect((await verify(k, key)).json.code).toBe('USAGE_EXCEEDED');
    expect((await verify(k, key, { cost: 0 })).json.code).toBe('VALID');
    expect((await verify(k, key, { cost: 0 })).json.code).toBe('RATE_LIMITED');
    expect((await verify(k, key, { minLevel: 3 })).json.code).toBe('INSUFFICIENT_LEVEL');
    const disable = { headers: await headers(), body: { enabled: false } };
    expect((await k.req('PATCH', `/apikeys/${key.key}/jwt`, disable)).status).toBe(200);
    expect((await verify(k, key, { minLevel: 3 })).json.code).toBe('DISABLED');
    k.time.now += 3_600_000;
    expect((await verify(k, key)).json.code).toBe('EXPIRED');
  });

  it('is one pool for a key and its successor during the grace period', async () => {
    const key = await create(k, { credits: { remaining: 3 }, ratelimit: { limit: 4, duration: 60 } });
    const headers = await k.bearer(nextUser - 1);
    expect((await verify(k, key)).json.credits.remaining).toBe(2);
    const rotated = await k.req('POST', `/apikeys/${key.key}/rotate/jwt`, {
      headers,
      body: { gracePeriod: 600 },
    });
    expect(rotated.status).toBe(201);
    const next = rotated.json.apikey as Key;
    expect((await verify(k, next)).json).toMatchObject({
      credits: { remaining: 1 },
      ratelimit: { remaining: 2 },
    });
    expect((await verify(k, key)).json).toMatchObject({
      credits: { remaining: 0 },
      ratelimit: { remaining: 1 },
    });
    expect((await verify(k, next)).json.code).toBe('USAGE_EXCEEDED');
    expect((await verify(k, key, { cost: 0 })).json).toMatchObject({
      code: 'VALID',
      ratelimit: { remaining: 0 },
    });
    expect((await verify(k, next, { cost: 0 })).json.code).toBe('RATE_LIMITED');
  });
});

describe('forward-auth', () => {
  it('allows with RateLimit-Policy and RateLimit, and answers 429 with Retry-After once the limit is used', async () => {
    const key = await create(k, { ratelimit: { limit: 2, duration: 30 } });
    const allowed = await forwardAuth(k, key);
    expect(allowed.status).toBe(200);
    expect(allowed.headers.get('ratelimit-policy')).toBe('"default";q=2;w=30');
    expect(allowed.headers.get('ratelimit')).toBe('"default";r=1;t=30');
    k.time.now += 10_000;
    expect((await forwardAuth(k, key)).headers.get('ratelimit')).toBe('"default";r=0;t=30');
    k.time.now += 5_000;
    const limited = await forwardAuth(k, key);
    expect(limited.status).toBe(429);
    expect(limited.json).toEqual({ result: 'error', error: expect.stringContaining('rate limit') });
    expect(limited.headers.get('retry-after')).toBe('15');
    expect(limited.headers.get('x-keygate-code')).toBe('RATE_LIMITED');
    expect(limited.headers.get('ratelimit-policy')).toBe('"default";q=2;w=30');
    expect(limited.headers.get('ratelimit')).toBe('"default";r=0;t=25');
    expect(limited.headers.get('x-keygate-user-id')).toBeNull();
  });

  it('takes one credit, and answers 429 USAGE_EXCEEDED with Retry-After only when a refill will come', async () => {
    const once = await create(k, { credits: { remaining: 1 } });
    expect((await forwardAuth(k, once)).status).toBe(200);
    const spent = await forwardAuth(k, once);
    expect(spent.status).toBe(429);
    expect(spent.headers.get('x-keygate-code')).toBe('USAGE_EXCEEDED');
    expect(spent.headers.get('retry-after')).toBeNull();

    const refilled = await create(k, { credits: { remaining: 0, refill: { amount: 1, interval: 60 } } });
    k.time.now += 20_000;
    const waiting = await forwardAuth(k, refilled);
    expect(waiting.status).toBe(429);
    expect(waiting.headers.get('retry-after')).toBe('40');
    expect(waiting.headers.get('ratelimit')).toBeNull();
  });

  it('names the code of every deny in X-Keygate-Code', async () => {
    const key = await create(k, {}, 1);
    const cases: [Record<string, string>, string, number, string][] = [
      [{}, '', 401, 'MISSING_CREDENTIAL'],
      [{ 'x-api-key': key.key, 'x-api-secret': 'wrong' }, '', 403, 'NOT_FOUND'],
      [{ authorization: 'Bearer nope' }, '', 403, 'INVALID_TOKEN'],
      [{ 'x-api-key': key.key, 'x-api-secret': key.secret }, '?minLevel=2', 403, 'INSUFFICIENT_LEVEL'],
    ];
    for (const [headers, query, status, code] of cases) {
      const answer = await k.req('GET', `/forward-auth${query}`, { headers });
      expect([answer.status, answer.headers.get('x-keygate-code')]).toEqual([status, code]);
    }
  });
});

describe('the verify body’s cost', () => {
  it.each([
    ['-1', -1],
    ['1001', 1001],
    ['1.5', 1.5],
    ['a string', '1'],
    ['null', null],
  ])('is refused when it is %s', async (_, cost) => {
    const answer = await k.req('POST', '/apikeys/verify', { body: { key: 'kg_x', secret: 'y', cost } });
    expect(answer.status).toBe(400);
    expect(answer.json.error).toContain('cost');
  });

  it('is accepted with a token and ignored', async () => {
    const answer = await k.req('POST', '/apikeys/verify', { body: { token: await k.token(1), cost: 1000 } });
    expect(answer.json).toMatchObject({ valid: true, code: 'VALID' });
  });
});

describe('usage history', () => {
  it('counts RATE_LIMITED and USAGE_EXCEEDED answers in their own columns', async () => {
    k.time.now = START + 30 * 86_400_000;
    const key = await create(k, { ratelimit: { limit: 2, duration: 60 }, credits: { remaining: 1 } });
    expect(await codes(k, key, 2)).toEqual(['VALID', 'USAGE_EXCEEDED']);
    expect(await codes(k, key, 2, { cost: 0 })).toEqual(['VALID', 'RATE_LIMITED']);
    const usage = await k.req('GET', `/apikeys/${key.key}/usage/jwt`, {
      headers: await k.bearer(nextUser - 1),
    });
    expect(usage.json.usage).toEqual([
      expect.objectContaining({ valid: 2, rateLimited: 1, usageExceeded: 1, denied: 0 }),
    ]);
  });
});

describe('a user’s policy', () => {
  /** A fresh user with `policy` and `n` keys of their own, each with `settings`. */
  async function userWith(
    policy: Record<string, unknown>,
    n: number,
    settings: Record<string, unknown> = {},
  ) {
    const userId = nextUser++;
    const put = await k.req('PUT', `/admin/users/${userId}/policy`, {
      headers: await k.operator('ops'),
      body: { ratelimit: null, credits: null, maxKeys: null, maxLevel: null, ...policy },
    });
    expect(put.status).toBe(200);
    const keys: Key[] = [];
    for (let i = 0; i < n; i++) {
      const created = await k.req('POST', '/apikeys/jwt', {
        headers: await k.bearer(userId),
        body: { name: `key ${i}`, level: 1, expiresIn: 3600, ...settings },
      });
      expect(created.status).toBe(201);
      keys.push(created.json.apikey);
    }
    return { userId, keys };
  }

  it('shares its rate limit among all the user’s keys: a burst split over two keys gets exactly the limit', async () => {
    const { keys } = await userWith({ ratelimit: { limit: 5, duration: 60 } }, 2);
    const [a, b] = keys as [Key, Key];
    const answers: string[] = [];
    for (let i = 0; i < 8; i++) answers.push((await verify(k, i % 2 === 0 ? a : b)).json.code);
    expect(answers.filter((code) => code === 'VALID')).toHaveLength(5);
    expect(answers.slice(5)).toEqual(['RATE_LIMITED', 'RATE_LIMITED', 'RATE_LIMITED']);
    expect((await verify(k, a)).json).toMatchObject({
      code: 'RATE_LIMITED',
      ratelimit: { limit: 5, remaining: 0, scope: 'user' },
    });
  });

  it('shares its credits pool: the keys together never take more than it holds', async () => {
    const { keys } = await userWith({ credits: { remaining: 5 } }, 2);
    const [a, b] = keys as [Key, Key];
    expect((await verify(k, a, { cost: 2 })).json.credits).toEqual({ remaining: 3, scope: 'user' });
    expect((await verify(k, b, { cost: 2 })).json.credits).toEqual({ remaining: 1, scope: 'user' });
    expect((await verify(k, a, { cost: 2 })).json).toMatchObject({
      code: 'USAGE_EXCEEDED',
      credits: { remaining: 1, scope: 'user' },
    });
    expect((await verify(k, b)).json.credits).toEqual({ remaining: 0, scope: 'user' });
    expect((await forwardAuth(k, a)).headers.get('x-keygate-code')).toBe('USAGE_EXCEEDED');
  });

  it('takes from both pools or from neither, and reports the binding one', async () => {
    const { userId, keys } = await userWith({ credits: { remaining: 10 } }, 1, { credits: { remaining: 3 } });
    const [key] = keys as [Key];
    // The key's pool has fewer left: it binds.
    expect((await verify(k, key, { cost: 2 })).json.credits).toEqual({ remaining: 1, scope: 'key' });
    // The key's pool refuses: the user's pool keeps what it had (8).
    expect((await verify(k, key, { cost: 2 })).json).toMatchObject({
      code: 'USAGE_EXCEEDED',
      credits: { remaining: 1, scope: 'key' },
    });
    const policy = await k.req('GET', `/admin/users/${userId}/policy`, { headers: await k.operator() });
    expect(policy.json.policy.credits).toEqual({ remaining: 8 });
    // The user's pool refuses first: the key's pool keeps its one.
    const put = await k.req('PUT', `/admin/users/${userId}/policy`, {
      headers: await k.operator(),
      body: { ratelimit: null, credits: { remaining: 0 }, maxKeys: null, maxLevel: null },
    });
    expect(put.status).toBe(200);
    expect((await verify(k, key)).json).toMatchObject({
      code: 'USAGE_EXCEEDED',
      credits: { remaining: 0, scope: 'user' },
    });
    const info = await k.req('GET', `/apikeys/${key.key}/jwt`, { headers: await k.bearer(userId) });
    expect(info.json.apikey.credits).toEqual({ remaining: 1 });
  });

  it('applies beside the key’s own limit, which the owner cannot lift past the policy', async () => {
    const { userId, keys } = await userWith({ ratelimit: { limit: 2, duration: 60 } }, 1, {
      ratelimit: { limit: 1, duration: 60 },
    });
    const [key] = keys as [Key];
    expect((await verify(k, key)).json.ratelimit).toMatchObject({ limit: 1, remaining: 0, scope: 'key' });
    // The owner removes the key's own limit: the policy's still holds (one of two left).
    const lifted = await k.req('PATCH', `/apikeys/${key.key}/jwt`, {
      headers: await k.bearer(userId),
      body: { ratelimit: null },
    });
    expect(lifted.status).toBe(200);
    expect(lifted.json.apikey.policy.ratelimit).toEqual({ limit: 2, duration: 60 });
    expect(await codes(k, key, 2)).toEqual(['VALID', 'RATE_LIMITED']);
    // A new key of the same user (unconstrained) shares the same used-up window.
    const fresh = await k.req('POST', '/apikeys/jwt', {
      headers: await k.bearer(userId),
      body: { name: 'escape', level: 1, expiresIn: 60 },
    });
    expect((await verify(k, fresh.json.apikey)).json).toMatchObject({
      code: 'RATE_LIMITED',
      ratelimit: { scope: 'user' },
    });
  });

  it('stops applying once it is removed', async () => {
    const { userId, keys } = await userWith(
      { ratelimit: { limit: 1, duration: 60 }, credits: { remaining: 0 } },
      1,
    );
    const [key] = keys as [Key];
    expect((await verify(k, key)).json.code).toBe('USAGE_EXCEEDED');
    const removed = await k.req('DELETE', `/admin/users/${userId}/policy`, { headers: await k.operator() });
    expect(removed.status).toBe(204);
    expect((await verify(k, key)).json).toEqual(
      expect.not.objectContaining({ ratelimit: expect.anything() }),
    );
    expect(await codes(k, key, 3)).toEqual(['VALID', 'VALID', 'VALID']);
  });
});
