// GET /admin/subjects?iss=&sub=: with JWT_USER_IDS=mapped, the user id keygate gave a token subject,
// or 404; asking never gives one. With numeric user ids there is nothing to look up (404).
import { afterEach, describe, expect, it } from 'bun:test';
import { type TestKeygate, testKeygate } from '../support/keygate';

let k: TestKeygate;
afterEach(() => k.close());

describe('GET /admin/subjects', () => {
  it('answers the user id a mapped subject was given, 404 for one never seen, without giving one', async () => {
    k = await testKeygate({ JWT_USER_IDS: 'mapped' });
    const created = await k.createKey('auth0|5f1b2c');
    const headers = await k.operator();
    const found = await k.req('GET', '/admin/subjects?iss=&sub=auth0%7C5f1b2c', { headers });
    expect(found.status).toBe(200);
    expect(found.json).toEqual({ result: 'success', userId: created.userId });
    expect((await k.req('GET', '/admin/subjects?iss=&sub=nobody', { headers })).status).toBe(404);
    expect(
      (await k.req('GET', '/admin/subjects?iss=https%3A%2F%2Fother&sub=auth0%7C5f1b2c', { headers })).status,
    ).toBe(404);
    // The lookup gave no id: the next new subject still gets the next one.
    const next = await k.createKey('second');
    expect(next.userId).toBe(created.userId + 1);
  });

  it.each([[''], ['?sub=x'], ['?iss='], ['?iss=&sub='], ['?iss=&sub=x&sub=y'], ['?iss=&sub=x&other=1']])(
    'answers 400 for the query %p',
    async (query) => {
      k = await testKeygate({ JWT_USER_IDS: 'mapped' });
      const response = await k.req('GET', `/admin/subjects${query}`, { headers: await k.operator() });
      expect(response.status).toBe(400);
    },
  );

  it('is the operator’s only: 401 without a credential, 403 for a user’s token', async () => {
    k = await testKeygate({ JWT_USER_IDS: 'mapped' });
    expect((await k.req('GET', '/admin/subjects?iss=&sub=x')).status).toBe(401);
    expect((await k.req('GET', '/admin/subjects?iss=&sub=x', { headers: await k.bearer('x') })).status).toBe(
      403,
    );
  });

  it('answers 404 with numeric user ids, saying why', async () => {
    k = await testKeygate();
    const response = await k.req('GET', '/admin/subjects?iss=&sub=42', { headers: await k.operator() });
    expect(response.status).toBe(404);
    expect(response.json.error).toContain('JWT_USER_IDS');
  });
});
