// JWT_USER_IDS=numeric (the default) and a validly signed token whose `sub` is no user id: the /jwt
// routes and forward-auth say so in their 403 and name JWT_USER_IDS=mapped; verify stays the bare
// code INVALID_TOKEN; any other refused token keeps the plain sentence.
import { afterAll, beforeAll, expect, it } from 'bun:test';
import { type TestKeygate, testKeygate } from '../support/keygate';

const NOT_NUMERIC =
  "The token's sub is not a numeric user id; keygate takes non-numeric subjects with JWT_USER_IDS=mapped.";

let k: TestKeygate;
let token: string;
beforeAll(async () => {
  k = await testKeygate();
  token = await k.keygate.jwt.sign({ sub: 'auth0|5f1c', ttlSeconds: 600 });
});
afterAll(() => k.close());

it('answers the /jwt routes with a 403 that names JWT_USER_IDS=mapped', async () => {
  const headers = { authorization: `Bearer ${token}` };
  const list = await k.req('GET', '/apikeys/jwt', { headers });
  expect(list.status).toBe(403);
  expect(list.json).toEqual({ result: 'error', error: NOT_NUMERIC });
  const create = await k.req('POST', '/apikeys/jwt', {
    headers,
    body: { name: 'a', level: 1, expiresIn: 60 },
  });
  expect(create.status).toBe(403);
  expect(create.json.error).toBe(NOT_NUMERIC);
});

it('answers forward-auth with the same sentence and the code INVALID_TOKEN', async () => {
  const answer = await k.req('GET', '/forward-auth', { headers: { authorization: `Bearer ${token}` } });
  expect(answer.status).toBe(403);
  expect(answer.headers.get('x-keygate-code')).toBe('INVALID_TOKEN');
  expect(answer.json.error).toBe(NOT_NUMERIC);
});

it('answers verify with the bare code INVALID_TOKEN, no sentence', async () => {
  const answer = await k.req('POST', '/apikeys/verify', { body: { token } });
  expect(answer.status).toBe(200);
  expect(answer.json).toEqual({ result: 'success', valid: false, code: 'INVALID_TOKEN' });
});

it('keeps "The token is not valid." for a token refused for anything else', async () => {
  const numeric = await k.token(42, { ttlSeconds: 60 });
  const tampered = `${numeric.slice(0, -3)}${numeric.endsWith('AAA') ? 'BAA' : 'AAA'}`;
  const answer = await k.req('GET', '/apikeys/jwt', { headers: { authorization: `Bearer ${tampered}` } });
  expect(answer.status).toBe(403);
  expect(answer.json.error).toBe('The token is not valid.');
});
