// keygate against a real OpenID provider: oidc-provider, started here by Node on 127.0.0.1 (see
// test/support/oidc-provider.mjs), issues a JWT access token to its client `backend` by the
// client-credentials grant, for a resource that is keygate's JWT_AUDIENCE. With JWT_USER_IDS=mapped
// that token's subject (the client id) creates, lists and verifies keys. The provider is stopped by
// its PID. Runs on each engine.
import { afterAll, beforeAll, describe, expect, it } from 'bun:test';
import { join } from 'node:path';
import type { Subprocess } from 'bun';
import { type TestKeygate, testKeygate } from '../support/keygate';
import { sharedPostgres, TEST_ENGINE } from '../support/postgres';

type ProviderInfo = {
  issuer: string;
  jwksUri: string;
  tokenUrl: string;
  resource: string;
  clientId: string;
  clientSecret: string;
  operatorClientId: string;
  operatorClientSecret: string;
};

let provider: Subprocess<'ignore', 'pipe', 'pipe'> | undefined;
let info: ProviderInfo;
let k: TestKeygate;

beforeAll(async () => {
  if (TEST_ENGINE === 'postgres') await sharedPostgres();
  provider = Bun.spawn(['node', join(import.meta.dir, '..', 'support', 'oidc-provider.mjs')], {
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const reader = provider.stdout.getReader();
  const { value } = await reader.read();
  reader.releaseLock();
  info = JSON.parse(new TextDecoder().decode(value).split('\n')[0] as string);
  k = await testKeygate({
    JWT_JWKS_URL: info.jwksUri,
    JWT_ISSUER: info.issuer,
    JWT_AUDIENCE: info.resource,
    JWT_USER_IDS: 'mapped',
  });
  // The provider's tokens carry the real time (iat, exp): keygate's clock must read it too.
  Object.defineProperty(k.time, 'now', { get: () => Date.now() });
}, 60_000);

afterAll(async () => {
  await k?.close();
  if (provider !== undefined) {
    process.kill(provider.pid, 'SIGTERM');
    await provider.exited;
  }
});

/** An access token from the provider, by the client-credentials grant (the `backend` client's by default). */
async function clientCredentialsToken(
  client = { id: info.clientId, secret: info.clientSecret, scope: 'api' },
): Promise<string> {
  const response = await fetch(info.tokenUrl, {
    method: 'POST',
    headers: {
      authorization: `Basic ${Buffer.from(`${client.id}:${client.secret}`).toString('base64')}`,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      resource: info.resource,
      scope: client.scope,
    }),
  });
  expect(response.status).toBe(200);
  const body = (await response.json()) as { access_token: string; token_type: string };
  expect(body.token_type).toBe('Bearer');
  return body.access_token;
}

describe('with tokens from a real OpenID provider (oidc-provider, client credentials)', () => {
  it('the client’s token creates, lists and verifies a key under the user id its subject was given', async () => {
    const token = await clientCredentialsToken();
    const claims = JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString());
    expect(claims).toMatchObject({ sub: 'backend', iss: info.issuer, aud: info.resource });
    const headers = { authorization: `Bearer ${token}` };

    const created = await k.req('POST', '/apikeys/jwt', {
      headers,
      body: { name: 'from-the-provider', level: 2, expiresIn: 600 },
    });
    expect(created.status).toBe(201);
    const { key, secret, userId } = created.json.apikey;
    expect(Number.isSafeInteger(userId) && userId > 0).toBe(true);

    const listed = await k.req('GET', '/apikeys/jwt', { headers });
    expect(listed.status).toBe(200);
    expect(listed.json.apikeys).toEqual([
      expect.objectContaining({ key, userId, name: 'from-the-provider' }),
    ]);

    const byKey = await k.req('POST', '/apikeys/verify', { body: { key, secret } });
    expect(byKey.json).toMatchObject({ valid: true, principal: { type: 'key', userId, subject: 'backend' } });
    const byToken = await k.req('POST', '/apikeys/verify', { body: { token } });
    expect(byToken.json).toMatchObject({
      valid: true,
      principal: { type: 'jwt', userId, subject: 'backend' },
    });
    const forwarded = await k.req('GET', '/forward-auth', { headers });
    expect(forwarded.status).toBe(200);
    expect(forwarded.headers.get('x-keygate-subject')).toBe('backend');
    expect(forwarded.headers.get('x-keygate-user-id')).toBe(String(userId));
  });

  it('a token with the admin scope opens the operator’s routes as is; one without it does not', async () => {
    const token = await clientCredentialsToken({
      id: info.operatorClientId,
      secret: info.operatorClientSecret,
      scope: 'keygate:admin',
    });
    const claims = JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString());
    expect(claims).toMatchObject({ sub: 'operator', scope: 'keygate:admin', aud: info.resource });
    const backend = await clientCredentialsToken();
    const created = await k.req('POST', '/apikeys/jwt', {
      headers: { authorization: `Bearer ${backend}` },
      body: { name: 'for-the-operator', level: 1, expiresIn: 600 },
    });
    const { key, userId } = created.json.apikey;

    const listed = await k.req('GET', `/admin/users/${userId}/apikeys`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(listed.status).toBe(200);
    expect(listed.json.apikeys.map((item: { key: string }) => item.key)).toContain(key);
    const refused = await k.req('GET', `/admin/users/${userId}/apikeys`, {
      headers: { authorization: `Bearer ${backend}` },
    });
    expect(refused.status).toBe(403);
    // The subject-to-user mapping, for the operator.
    const subject = await k.req('GET', `/admin/subjects?iss=${encodeURIComponent(info.issuer)}&sub=backend`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(subject.json).toEqual({ result: 'success', userId });
  });

  it('a second token for the same client is the same user', async () => {
    const first = await k.req('POST', '/apikeys/verify', { body: { token: await clientCredentialsToken() } });
    const second = await k.req('POST', '/apikeys/verify', {
      body: { token: await clientCredentialsToken() },
    });
    expect(first.json.valid).toBe(true);
    expect(second.json.principal.userId).toBe(first.json.principal.userId);
  });

  it('a token whose signature the provider’s keys do not match is refused', async () => {
    const [header, payload, signature] = (await clientCredentialsToken()).split('.') as [
      string,
      string,
      string,
    ];
    const forged = `${header}.${payload}.${signature.startsWith('A') ? `B${signature.slice(1)}` : `A${signature.slice(1)}`}`;
    const response = await k.req('POST', '/apikeys/verify', { body: { token: forged } });
    expect(response.json).toEqual({ result: 'success', valid: false, code: 'INVALID_TOKEN' });
  });
});
