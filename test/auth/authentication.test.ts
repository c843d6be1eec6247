// Every way authentication can be absent (401) or fail (403), for both schemes and both operations.
import { afterEach, beforeEach, describe, expect, it } from 'bun:test';
import { SignJWT } from 'jose';
import { JWT_SECRET, START, type TestKeygate, testKeygate } from '../support/keygate';

let k: TestKeygate;
beforeEach(async () => {
  k = await testKeygate();
});
afterEach(() => k.close());

const BODY = { name: 'k', level: 1, expiresIn: 60 };
const secretKey = new TextEncoder().encode(JWT_SECRET);
const nowS = Math.floor(START / 1000);

function signed(
  claims: Record<string, unknown>,
  header: Record<string, unknown> = { alg: 'HS256' },
  key = secretKey,
) {
  return new SignJWT(claims).setProtectedHeader(header as { alg: string }).sign(key);
}

function unsigned(claims: Record<string, unknown>): string {
  const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${part({ alg: 'none', typ: 'JWT' })}.${part(claims)}.`;
}

const operations = [
  ['create', (suffix: string) => ['POST', `/apikeys/${suffix}`] as const],
  ['delete', (suffix: string) => ['DELETE', `/apikeys/kg_0000000000000000000000/${suffix}`] as const],
] as const;

describe.each(operations)('JWT scheme, %s', (_, route) => {
  const [method, path] = route('jwt');
  const send = (headers: Record<string, string>) =>
    k.req(method, path, { headers, body: method === 'POST' ? BODY : undefined });

  it.each([
    ['no Authorization header', {}],
    ['a Basic header', { authorization: 'Basic a2V5OnNlY3JldA==' }],
    ['an API key header pair', { 'x-api-key': 'kg_0000000000000000000000', 'x-api-secret': 'x' }],
  ])('answers 401 for %s', async (_, headers) => {
    const response = await send(headers);
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe('Bearer realm="keygate"');
    expect(response.json.result).toBe('error');
  });

  const cases: Array<[string, () => Promise<string>]> = [
    ['a token that is not a JWT', async () => 'Bearer abc'],
    ['an empty bearer', async () => 'Bearer '],
    ['two tokens', async () => `Bearer ${await signed({ sub: '1', exp: nowS + 60 })} extra`],
    [
      'a bad signature',
      async () =>
        `Bearer ${await signed({ sub: '1', exp: nowS + 60 }, undefined, new TextEncoder().encode('another-secret-of-at-least-32-bytes!!'))}`,
    ],
    [
      'a tampered payload',
      async () => {
        const [h, , s] = (await signed({ sub: '1', exp: nowS + 60 })).split('.');
        return `Bearer ${h}.${Buffer.from(JSON.stringify({ sub: '2', exp: nowS + 60 })).toString('base64url')}.${s}`;
      },
    ],
    ['alg none', async () => `Bearer ${unsigned({ sub: '1', exp: nowS + 60 })}`],
    ['alg HS512', async () => `Bearer ${await signed({ sub: '1', exp: nowS + 60 }, { alg: 'HS512' })}`],
    ['no exp', async () => `Bearer ${await signed({ sub: '1' })}`],
    ['an expired exp', async () => `Bearer ${await signed({ sub: '1', exp: nowS - 1 })}`],
    ['exp now', async () => `Bearer ${await signed({ sub: '1', exp: nowS })}`],
    ['nbf in the future', async () => `Bearer ${await signed({ sub: '1', exp: nowS + 60, nbf: nowS + 30 })}`],
    ['no sub', async () => `Bearer ${await signed({ exp: nowS + 60 })}`],
    ['sub not a number', async () => `Bearer ${await signed({ sub: 'alice', exp: nowS + 60 })}`],
    ['sub negative', async () => `Bearer ${await signed({ sub: -1, exp: nowS + 60 })}`],
    ['sub fractional', async () => `Bearer ${await signed({ sub: 1.5, exp: nowS + 60 })}`],
    [
      'sub beyond safe integers',
      async () => `Bearer ${await signed({ sub: '99999999999999999', exp: nowS + 60 })}`,
    ],
    ['level claim 9', async () => `Bearer ${await signed({ sub: '1', exp: nowS + 60, level: 9 })}`],
    ['level claim "3"', async () => `Bearer ${await signed({ sub: '1', exp: nowS + 60, level: '3' })}`],
  ];
  it.each(cases)('answers 403 for %s', async (_, authorization) => {
    const response = await send({ authorization: await authorization() });
    expect(response.status).toBe(403);
    expect(response.json.result).toBe('error');
    expect(response.headers.get('content-type')).toStartWith('application/json');
  });

  it('accepts sub as a JSON number and a lower-case bearer scheme', async () => {
    const token = await signed({ sub: 7, exp: nowS + 60 });
    const response = await send({ authorization: `bearer ${token}` });
    expect(response.status).toBe(method === 'POST' ? 201 : 404);
  });
});

describe('JWT issuer and audience, when configured', () => {
  it('requires the configured iss and aud', async () => {
    const strict = await testKeygate({ JWT_ISSUER: 'https://id.example', JWT_AUDIENCE: 'keygate' });
    const send = async (claims: Record<string, unknown>) =>
      (
        await strict.req('POST', '/apikeys/jwt', {
          headers: { authorization: `Bearer ${await signed({ sub: '1', exp: nowS + 60, ...claims })}` },
          body: BODY,
        })
      ).status;
    expect(await send({ iss: 'https://id.example', aud: 'keygate' })).toBe(201);
    expect(await send({ iss: 'https://evil.example', aud: 'keygate' })).toBe(403);
    expect(await send({ iss: 'https://id.example', aud: 'other' })).toBe(403);
    expect(await send({ aud: 'keygate' })).toBe(403);
    expect(await send({ iss: 'https://id.example' })).toBe(403);
    await strict.close();
  });
});

describe.each(operations)('key scheme, %s', (_, route) => {
  const [method, path] = route('key');
  const send = (headers: Record<string, string>) =>
    k.req(method, path, { headers, body: method === 'POST' ? BODY : undefined });

  it.each([
    ['no credentials', {}],
    ['a Bearer header', { authorization: 'Bearer abc' }],
  ])('answers 401 for %s', async (_, headers) => {
    const response = await send(headers);
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe('Basic realm="keygate"');
  });

  type Creds = (key: { key: string; secret: string }) => Record<string, string>;
  const cases: Array<[string, Creds]> = [
    ['a wrong secret (Basic)', (key) => k.basic(key.key, `${key.secret}x`)],
    ['a wrong secret (headers)', (key) => ({ 'x-api-key': key.key, 'x-api-secret': 'nope' })],
    ['an unknown key', (key) => k.basic('kg_0000000000000000000000', key.secret)],
    ['a key not of the key format', (key) => k.basic('hello', key.secret)],
    ['Basic that is not base64', () => ({ authorization: 'Basic !!!not-base64' })],
    [
      'Basic without a colon',
      (key) => ({ authorization: `Basic ${Buffer.from(key.key).toString('base64')}` }),
    ],
    [
      'Basic with an empty secret',
      (key) => ({ authorization: `Basic ${Buffer.from(`${key.key}:`).toString('base64')}` }),
    ],
    ['an empty Basic', () => ({ authorization: 'Basic' })],
    ['X-API-Key without X-API-Secret', (key) => ({ 'x-api-key': key.key })],
    ['X-API-Secret without X-API-Key', (key) => ({ 'x-api-secret': key.secret })],
  ];
  it.each(cases)('answers 403 for %s', async (_, credentials) => {
    const key = await k.createKey(1);
    const response = await send(credentials(key));
    expect(response.status).toBe(403);
    expect(response.json.result).toBe('error');
  });

  it('answers 403 for a key that expired, before the purge removed it', async () => {
    const key = await k.createKey(1, { expiresIn: 10 });
    k.time.now += 10_000;
    expect((await send(k.basic(key.key, key.secret))).status).toBe(403);
  });

  it('accepts the X-API-Key and X-API-Secret headers', async () => {
    const key = await k.createKey(1);
    const response = await send({ 'x-api-key': key.key, 'x-api-secret': key.secret });
    expect(response.status).toBe(method === 'POST' ? 201 : 404);
  });
});
