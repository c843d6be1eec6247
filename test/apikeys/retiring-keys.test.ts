// A key in its grace period after a rotation is retiring: it still authenticates and verifies until
// its new expiry, but it may not rotate itself again, nor create or rotate any key (403), so a leaked
// key cannot renew itself through rotations. Runs on both engines (KEYGATE_TEST_DATABASE=postgres).
import { afterAll, beforeAll, describe, expect, it } from 'bun:test';
import { type TestKeygate, testKeygate } from '../support/keygate';

let k: TestKeygate;
beforeAll(async () => {
  k = await testKeygate();
});
afterAll(() => k.close());

/** A key of user 1 rotated with a grace period through a token: the retiring one and its successor. */
async function rotatedWithGrace() {
  const old = await k.createKey(1, { level: 5 });
  const rotated = await k.req('POST', `/apikeys/${old.key}/rotate/jwt`, {
    headers: await k.bearer(1),
    body: { gracePeriod: 600 },
  });
  expect(rotated.status).toBe(201);
  return { old, next: rotated.json.apikey as { key: string; secret: string } };
}

describe('a retiring key', () => {
  it('still authenticates, verifies and forward-auths until its grace period ends', async () => {
    const { old } = await rotatedWithGrace();
    const headers = k.basic(old.key, old.secret);
    expect((await k.req('GET', `/apikeys/${old.key}/key`, { headers })).status).toBe(200);
    expect((await k.req('GET', '/apikeys/key', { headers })).status).toBe(200);
    const verified = await k.req('POST', '/apikeys/verify', { body: { key: old.key, secret: old.secret } });
    expect(verified.json).toMatchObject({ valid: true, code: 'VALID' });
    expect((await k.req('GET', '/forward-auth', { headers })).status).toBe(200);
    k.time.now += 600_000;
    const after = await k.req('POST', '/apikeys/verify', { body: { key: old.key, secret: old.secret } });
    expect(after.json).toMatchObject({ valid: false, code: 'EXPIRED' });
  });

  it.each<[string, (key: string) => { path: string; body: object }]>([
    ['rotate itself again', (key) => ({ path: `/apikeys/${key}/rotate/key`, body: { gracePeriod: 600 } })],
    ['rotate itself without a grace period', (key) => ({ path: `/apikeys/${key}/rotate/key`, body: {} })],
    ['create a key', () => ({ path: '/apikeys/key', body: { name: 'child', level: 1, expiresIn: 60 } })],
  ])('may not %s (403)', async (_, request) => {
    const { old } = await rotatedWithGrace();
    const { path, body } = request(old.key);
    const response = await k.req('POST', path, { headers: k.basic(old.key, old.secret), body });
    expect(response.status).toBe(403);
    expect(response.json).toEqual({ result: 'error', error: expect.stringContaining('retiring') });
  });

  it('may not rotate another key of its user (403), which stays as it was', async () => {
    const { old } = await rotatedWithGrace();
    const other = await k.createKey(1, { level: 2 });
    const response = await k.req('POST', `/apikeys/${other.key}/rotate/key`, {
      headers: k.basic(old.key, old.secret),
    });
    expect(response.status).toBe(403);
    const verified = await k.req('POST', '/apikeys/verify', {
      body: { key: other.key, secret: other.secret },
    });
    expect(verified.json).toMatchObject({ valid: true });
  });

  it('may still delete itself', async () => {
    const { old } = await rotatedWithGrace();
    const deleted = await k.req('DELETE', `/apikeys/${old.key}/key`, {
      headers: k.basic(old.key, old.secret),
    });
    expect(deleted.status).toBe(204);
  });

  it('leaves its successor free to act: the new key rotates and creates', async () => {
    const { next } = await rotatedWithGrace();
    const headers = k.basic(next.key, next.secret);
    const created = await k.req('POST', '/apikeys/key', {
      headers,
      body: { name: 'child', level: 1, expiresIn: 60 },
    });
    expect(created.status).toBe(201);
    const rotated = await k.req('POST', `/apikeys/${next.key}/rotate/key`, {
      headers,
      body: { gracePeriod: 60 },
    });
    expect(rotated.status).toBe(201);
  });
});
