// JWT_USER_IDS=mapped over HTTP, on each engine: the subjects identity providers really issue get a
// user id of keygate's own, kept; another issuer is another user; that id owns, lists and caps keys;
// the principal names the subject (a token's, or a key owner's) and forward-auth passes it on in
// X-Keygate-Subject; audit lines keep `by` = jwt:<sub>. With numeric user ids none of that shows.
import { afterEach, beforeAll, describe, expect, it } from 'bun:test';
import { SignJWT } from 'jose';
import { JWT_SECRET, START, type TestKeygate, testKeygate } from '../support/keygate';
import { sharedPostgres, TEST_ENGINE } from '../support/postgres';

// Starting the run's PostgreSQL takes longer than one test may.
beforeAll(async () => {
  if (TEST_ENGINE === 'postgres') await sharedPostgres();
}, 60_000);

const open: TestKeygate[] = [];
afterEach(async () => {
  for (const k of open.splice(0)) await k.close();
});
async function keygate(env: Record<string, string> = {}) {
  const k = await testKeygate({ JWT_USER_IDS: 'mapped', ...env });
  open.push(k);
  return k;
}

/** A token signed with the test secret, with any claims (an `iss`, a `sub` of any JSON type). */
const rawToken = (claims: Record<string, unknown>) =>
  new SignJWT({ exp: Math.floor(START / 1000) + 3600, ...claims })
    .setProtectedHeader({ alg: 'HS256' })
    .sign(new TextEncoder().encode(JWT_SECRET));
const bearerOf = async (claims: Record<string, unknown>) => ({
  authorization: `Bearer ${await rawToken(claims)}`,
});

const SUBJECTS: Array<[string, unknown, string]> = [
  ['Auth0', 'auth0|5f7c8ec7c33c6c004bbafe82', 'auth0|5f7c8ec7c33c6c004bbafe82'],
  ['Keycloak (a UUID)', 'f7a2c6e8-3b1d-4c5e-9a0f-2d3e4f5a6b7c', 'f7a2c6e8-3b1d-4c5e-9a0f-2d3e4f5a6b7c'],
  ['Cognito (a UUID)', '94a8f4f8-0011-70c3-3c1e-5e2d8b5a1f60', '94a8f4f8-0011-70c3-3c1e-5e2d8b5a1f60'],
  ['Okta', '00u1ab2cd3EF4gh5i6j7', '00u1ab2cd3EF4gh5i6j7'],
  ['Google (21 digits, beyond safe integers)', '108177843917524569364', '108177843917524569364'],
  ['a numeric sub (a JSON number)', 42, '42'],
  ['a numeric sub (a decimal string)', '42', '42'],
  ['255 characters', 'x'.repeat(255), 'x'.repeat(255)],
  ['255 characters outside the BMP', '𝔘'.repeat(255), '𝔘'.repeat(255)],
];

describe('JWT_USER_IDS=mapped', () => {
  it.each(SUBJECTS)(
    '%s: creates, lists and verifies keys under a user id of its own',
    async (_, sub, subject) => {
      const k = await keygate();
      const headers = await bearerOf({ sub, iss: 'https://idp.example/' });
      const created = await k.req('POST', '/apikeys/jwt', {
        headers,
        body: { name: 'ci', level: 3, expiresIn: 600 },
      });
      expect(created.status).toBe(201);
      const { userId, key, secret } = created.json.apikey;
      expect(Number.isSafeInteger(userId) && userId > 0).toBe(true);
      const listed = await k.req('GET', '/apikeys/jwt', { headers });
      expect(listed.json.apikeys.map((item: { key: string }) => item.key)).toEqual([key]);
      const byToken = await k.req('POST', '/apikeys/verify', {
        body: { token: await rawToken({ sub, iss: 'https://idp.example/' }) },
      });
      expect(byToken.json).toMatchObject({ valid: true, principal: { type: 'jwt', userId, subject } });
      const byKey = await k.req('POST', '/apikeys/verify', { body: { key, secret } });
      expect(byKey.json).toMatchObject({ valid: true, principal: { type: 'key', userId, subject } });
    },
  );

  it.each<[string, unknown]>([
    ['256 characters', 'x'.repeat(256)],
    ['empty', ''],
    ['NUL inside', 'a\u0000b'],
    ['an unpaired surrogate', 'a\ud800b'],
    ['a negative number', -1],
    ['a fraction', 1.5],
    ['an object', { id: 1 }],
  ])('refuses a sub that is %s (403, refusal reason claims)', async (_, sub) => {
    const k = await keygate({ LOG_LEVEL: 'debug' });
    const headers = await bearerOf({ sub });
    const response = await k.req('POST', '/apikeys/jwt', {
      headers,
      body: { name: 'ci', level: 3, expiresIn: 600 },
    });
    expect(response.status).toBe(403);
    expect(response.json).toEqual({ result: 'error', error: 'The token is not valid.' });
    expect(k.logLines('request').at(-1)).toMatchObject({ status: 403, tokenRefusal: 'claims' });
    const verified = await k.req('POST', '/apikeys/verify', {
      body: { token: headers.authorization.slice(7) },
    });
    expect(verified.json).toEqual({ result: 'success', valid: false, code: 'INVALID_TOKEN' });
  });

  it('gives the same subject the same id every time, and another issuer (or none) another id', async () => {
    const k = await keygate();
    const userIdOf = async (claims: Record<string, unknown>) => {
      const response = await k.req('POST', '/apikeys/verify', { body: { token: await rawToken(claims) } });
      return response.json.principal.userId as number;
    };
    const first = await userIdOf({ sub: 'auth0|abc', iss: 'https://a.example/' });
    expect(await userIdOf({ sub: 'auth0|abc', iss: 'https://a.example/', level: 2 })).toBe(first);
    const otherIssuer = await userIdOf({ sub: 'auth0|abc', iss: 'https://b.example/' });
    const noIssuer = await userIdOf({ sub: 'auth0|abc' });
    expect(new Set([first, otherIssuer, noIssuer]).size).toBe(3);
  });

  it('keeps each subject to its own keys: another cannot list, get or delete them', async () => {
    const k = await keygate();
    const alice = await bearerOf({ sub: 'auth0|alice', iss: 'https://a.example/' });
    const aliceElsewhere = await bearerOf({ sub: 'auth0|alice', iss: 'https://b.example/' });
    const created = await k.req('POST', '/apikeys/jwt', {
      headers: alice,
      body: { name: 'a', level: 3, expiresIn: 600 },
    });
    const { key } = created.json.apikey;
    expect((await k.req('GET', '/apikeys/jwt', { headers: aliceElsewhere })).json.apikeys).toEqual([]);
    expect((await k.req('GET', `/apikeys/${key}/jwt`, { headers: aliceElsewhere })).status).toBe(404);
    expect((await k.req('DELETE', `/apikeys/${key}/jwt`, { headers: aliceElsewhere })).status).toBe(404);
    expect((await k.req('GET', `/apikeys/${key}/jwt`, { headers: alice })).status).toBe(200);
    expect((await k.req('DELETE', `/apikeys/${key}/jwt`, { headers: alice })).status).toBe(204);
  });

  it('counts a subject’s keys against MAX_KEYS_PER_USER under its user id', async () => {
    const k = await keygate({ MAX_KEYS_PER_USER: '1' });
    const body = { name: 'a', level: 3, expiresIn: 600 };
    const alice = await bearerOf({ sub: 'okta|alice' });
    expect((await k.req('POST', '/apikeys/jwt', { headers: alice, body })).status).toBe(201);
    expect((await k.req('POST', '/apikeys/jwt', { headers: alice, body })).status).toBe(409);
    const bob = await bearerOf({ sub: 'okta|bob' });
    expect((await k.req('POST', '/apikeys/jwt', { headers: bob, body })).status).toBe(201);
  });

  it('writes audit lines with by = jwt:<sub>, the raw subject, and userId the mapped id', async () => {
    const k = await keygate();
    const created = await k.req('POST', '/apikeys/jwt', {
      headers: await bearerOf({ sub: 'auth0|audited' }),
      body: { name: 'a', level: 3, expiresIn: 600 },
    });
    const [line] = k.logLines('apikey.created');
    expect(line).toMatchObject({
      by: 'jwt:auth0|audited',
      userId: created.json.apikey.userId,
      key: created.json.apikey.key,
    });
  });

  it('forward-auth: the principal’s subject and X-Keygate-Subject, for a token and for its key', async () => {
    const k = await keygate();
    const headers = await bearerOf({ sub: 'auth0|forwarded' });
    const byToken = await k.req('GET', '/forward-auth', { headers });
    expect(byToken.status).toBe(200);
    expect(byToken.headers.get('x-keygate-subject')).toBe('auth0|forwarded');
    expect(byToken.json.principal).toMatchObject({ type: 'jwt', subject: 'auth0|forwarded' });
    const created = await k.req('POST', '/apikeys/jwt', {
      headers,
      body: { name: 'a', level: 3, expiresIn: 600 },
    });
    const byKey = await k.req('GET', '/forward-auth', {
      headers: k.basic(created.json.apikey.key, created.json.apikey.secret),
    });
    expect(byKey.status).toBe(200);
    expect(byKey.headers.get('x-keygate-subject')).toBe('auth0|forwarded');
    expect(byKey.headers.get('x-keygate-user-id')).toBe(String(created.json.apikey.userId));
    expect(byKey.json.principal).toMatchObject({ type: 'key', subject: 'auth0|forwarded' });
  });

  it('forward-auth percent-encodes a subject a header cannot carry as it is', async () => {
    const k = await keygate();
    const subject = 'Zoë 100%|東京';
    const response = await k.req('GET', '/forward-auth', { headers: await bearerOf({ sub: subject }) });
    expect(response.status).toBe(200);
    const header = response.headers.get('x-keygate-subject') as string;
    expect(header).toBe('Zo%C3%AB%20100%25|%E6%9D%B1%E4%BA%AC');
    expect(decodeURIComponent(header)).toBe(subject);
    expect(response.json.principal.subject).toBe(subject);
  });

  it('keygate token signs any subject, and the server maps it', async () => {
    const k = await keygate();
    const headers = await k.bearer('auth0|from-the-helper');
    const response = await k.req('GET', '/forward-auth', { headers });
    expect(response.headers.get('x-keygate-subject')).toBe('auth0|from-the-helper');
  });
});

describe('JWT_USER_IDS=numeric (the default)', () => {
  it('adds no subject to principals and no X-Keygate-Subject header', async () => {
    const k = await testKeygate();
    open.push(k);
    const headers = await k.bearer(42);
    const created = await k.req('POST', '/apikeys/jwt', {
      headers,
      body: { name: 'a', level: 3, expiresIn: 600 },
    });
    expect(created.json.apikey.userId).toBe(42);
    for (const credential of [headers, k.basic(created.json.apikey.key, created.json.apikey.secret)]) {
      const response = await k.req('GET', '/forward-auth', { headers: credential });
      expect(response.status).toBe(200);
      expect(response.headers.get('x-keygate-subject')).toBeNull();
      expect(response.json.principal.userId).toBe(42);
      expect('subject' in response.json.principal).toBe(false);
    }
  });

  it('still refuses a subject that is not a number (403, claims)', async () => {
    const k = await testKeygate();
    open.push(k);
    const response = await k.req('GET', '/forward-auth', { headers: await bearerOf({ sub: 'auth0|abc' }) });
    expect(response.status).toBe(403);
  });
});
