// Who may do what: keys belong to a user, levels never escalate, the per-user cap, expiry.
import { afterEach, beforeEach, describe, expect, it } from 'bun:test';
import { type TestKeygate, testKeygate } from '../support/keygate';

let k: TestKeygate;
beforeEach(async () => {
  k = await testKeygate({ MAX_KEYS_PER_USER: '3' });
});
afterEach(() => k.close());

const body = (level: number) => ({ name: 'k', level, expiresIn: 3600 });

describe('ownership', () => {
  it('gives a key created through /jwt to the token subject', async () => {
    expect((await k.createKey(42)).userId).toBe(42);
  });

  it('accepts sub as a decimal string', async () => {
    const token = await k.token('42');
    const response = await k.req('POST', '/apikeys/jwt', {
      headers: { authorization: `Bearer ${token}` },
      body: body(1),
    });
    expect(response.json.apikey.userId).toBe(42);
  });

  it("gives a key created through /key to the authenticating key's user", async () => {
    const parent = await k.createKey(42, { level: 5 });
    const response = await k.req('POST', '/apikeys/key', {
      headers: k.basic(parent.key, parent.secret),
      body: body(2),
    });
    expect(response.status).toBe(201);
    expect(response.json.apikey.userId).toBe(42);
  });

  it('lets a key delete itself', async () => {
    const self = await k.createKey(42);
    const response = await k.req('DELETE', `/apikeys/${self.key}/key`, {
      headers: k.basic(self.key, self.secret),
    });
    expect(response.status).toBe(204);
  });

  it("answers 404 when a key tries to delete another user's key", async () => {
    const mine = await k.createKey(1, { level: 8 });
    const theirs = await k.createKey(2, { level: 0 });
    const response = await k.req('DELETE', `/apikeys/${theirs.key}/key`, {
      headers: k.basic(mine.key, mine.secret),
    });
    expect(response.status).toBe(404);
  });
});

describe('levels never escalate', () => {
  it('lets a token without a level claim create up to level 8', async () => {
    const response = await k.req('POST', '/apikeys/jwt', { headers: await k.bearer(1), body: body(8) });
    expect(response.status).toBe(201);
  });

  it.each([
    [3, 3, 201],
    [3, 4, 403],
    [0, 0, 201],
    [0, 1, 403],
  ])('a token with level %d creating level %d answers %d', async (claim, level, status) => {
    const response = await k.req('POST', '/apikeys/jwt', {
      headers: await k.bearer(1, claim),
      body: body(level),
    });
    expect(response.status).toBe(status);
  });

  it.each([
    [5, 5, 201],
    [5, 6, 403],
  ])('a key of level %d creating level %d answers %d', async (own, level, status) => {
    const parent = await k.createKey(1, { level: own });
    const response = await k.req('POST', '/apikeys/key', {
      headers: k.basic(parent.key, parent.secret),
      body: body(level),
    });
    expect(response.status).toBe(status);
  });

  it('answers 403 for deleting an own key above the caller level, and keeps it', async () => {
    const high = await k.createKey(1, { level: 6 });
    const response = await k.req('DELETE', `/apikeys/${high.key}/jwt`, { headers: await k.bearer(1, 5) });
    expect(response.status).toBe(403);
    expect(await k.keygate.store.findKey(high.key)).toBeDefined();
  });

  it('lets a key delete an own key at or below its level', async () => {
    const parent = await k.createKey(1, { level: 4 });
    const child = await k.createKey(1, { level: 4 });
    const response = await k.req('DELETE', `/apikeys/${child.key}/key`, {
      headers: k.basic(parent.key, parent.secret),
    });
    expect(response.status).toBe(204);
  });
});

describe('the per-user cap', () => {
  it('answers 409 once the user holds MAX_KEYS_PER_USER live keys, for that user only', async () => {
    for (let i = 0; i < 3; i++) await k.createKey(1);
    const full = await k.req('POST', '/apikeys/jwt', { headers: await k.bearer(1), body: body(1) });
    expect(full.status).toBe(409);
    expect(full.json.result).toBe('error');
    expect((await k.req('POST', '/apikeys/jwt', { headers: await k.bearer(2), body: body(1) })).status).toBe(
      201,
    );
  });

  it('holds under concurrent creates', async () => {
    const headers = await k.bearer(1);
    const responses = await Promise.all(
      Array.from({ length: 10 }, () => k.req('POST', '/apikeys/jwt', { headers, body: body(1) })),
    );
    expect(responses.filter((r) => r.status === 201)).toHaveLength(3);
    expect(responses.filter((r) => r.status === 409)).toHaveLength(7);
  });

  it('counts only live keys: expired ones free their place', async () => {
    for (let i = 0; i < 3; i++) await k.createKey(1, { expiresIn: 10 });
    k.time.now += 10_000;
    expect((await k.req('POST', '/apikeys/jwt', { headers: await k.bearer(1), body: body(1) })).status).toBe(
      201,
    );
  });

  it('frees a place when a key is deleted', async () => {
    const keys = [await k.createKey(1), await k.createKey(1), await k.createKey(1)];
    const headers = await k.bearer(1);
    expect((await k.req('DELETE', `/apikeys/${keys[0]?.key}/jwt`, { headers })).status).toBe(204);
    expect((await k.req('POST', '/apikeys/jwt', { headers, body: body(1) })).status).toBe(201);
  });
});

describe('expiry', () => {
  it('fails authentication of an expired key at once, before any purge', async () => {
    const key = await k.createKey(1, { expiresIn: 30 });
    const headers = k.basic(key.key, key.secret);
    k.time.now += 29_999;
    expect((await k.req('POST', '/apikeys/key', { headers, body: body(0) })).status).toBe(201);
    k.time.now += 1;
    expect((await k.req('POST', '/apikeys/key', { headers, body: body(0) })).status).toBe(403);
  });
});
