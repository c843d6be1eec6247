// A token's lifetime is bounded by the end of year 9999, not by MAX_EXPIRES_IN_SECONDS (which bounds
// keys): an identity provider's one-hour token works wherever keys are capped below an hour.
import { afterAll, describe, expect, it } from 'bun:test';
import { testKeygate } from '../support/keygate';

const app = await testKeygate({ MAX_EXPIRES_IN_SECONDS: '60' });
afterAll(() => app.close());

describe('a token that outlives MAX_EXPIRES_IN_SECONDS', () => {
  it('creates a key, lists and verifies like any other token', async () => {
    const token = await app.token(42, { ttlSeconds: 3600 });
    const headers = { authorization: `Bearer ${token}` };
    const created = await app.req('POST', '/apikeys/jwt', {
      headers,
      body: { name: 'short', level: 1, expiresIn: 60 },
    });
    expect(created.status).toBe(201);
    expect((await app.req('GET', '/apikeys/jwt', { headers })).status).toBe(200);
    const verified = await app.req('POST', '/apikeys/verify', { body: { token } });
    expect(verified.json).toMatchObject({
      valid: true,
      code: 'VALID',
      principal: { type: 'jwt', userId: 42 },
    });
  });

  it('still refuses a key that would outlive it (400)', async () => {
    const headers = await app.bearer(42);
    const created = await app.req('POST', '/apikeys/jwt', {
      headers,
      body: { name: 'long', level: 1, expiresIn: 61 },
    });
    expect(created.status).toBe(400);
  });
});
