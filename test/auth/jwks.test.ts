// Tokens from an identity provider: a JWKS endpoint served by the test (Bun.serve on 127.0.0.1) with
// RS256, ES256 and EdDSA keys. Time is the test keygate's movable clock, never a sleep.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'bun:test';
import { createHmac } from 'node:crypto';
import { exportJWK, exportSPKI, generateKeyPair, type JWK, SignJWT } from 'jose';
import { createJwksKeySet, JwksUnavailable } from '../../src/auth/jwks';
import { START, type TestKeygate, testKeygate } from '../support/keygate';

type Signer = { kid: string; alg: string; privateKey: CryptoKey; jwk: JWK; pem: string };

async function signer(kid: string, alg: 'RS256' | 'ES256' | 'EdDSA' | 'ES384'): Promise<Signer> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  return { kid, alg, privateKey, jwk, pem: await exportSPKI(publicKey) };
}

/** The identity provider: serves `published` as its key set, or 503 while `down`. */
const provider = {
  published: [] as JWK[],
  down: false,
  requests: 0,
  server: undefined as ReturnType<typeof Bun.serve> | undefined,
  get url() {
    return `http://127.0.0.1:${this.server?.port}/.well-known/jwks.json`;
  },
};

let rsa: Signer;
let ec: Signer;
let ed: Signer;
let rotated: Signer;
let ec384: Signer;

beforeAll(async () => {
  [rsa, ec, ed, rotated, ec384] = await Promise.all([
    signer('rsa-1', 'RS256'),
    signer('ec-1', 'ES256'),
    signer('ed-1', 'EdDSA'),
    signer('rsa-2', 'RS256'),
    signer('ec384-1', 'ES384'),
  ]);
  provider.server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch(request) {
      provider.requests++;
      if (new URL(request.url).pathname !== '/.well-known/jwks.json')
        return new Response('no', { status: 404 });
      if (provider.down) return new Response('down', { status: 503 });
      return Response.json({ keys: provider.published });
    },
  });
});
afterAll(() => provider.server?.stop(true));

let k: TestKeygate;
beforeEach(async () => {
  provider.published = [rsa.jwk, ec.jwk, ed.jwk, ec384.jwk];
  provider.down = false;
  provider.requests = 0;
  k = await testKeygate({ JWT_JWKS_URL: provider.url, LOG_LEVEL: 'debug' });
});
afterEach(() => k.close());

const nowS = () => Math.floor(k.time.now / 1000);

function token(by: Signer, claims: Record<string, unknown> = {}, header: Record<string, unknown> = {}) {
  return new SignJWT({ sub: '42', exp: nowS() + 300, ...claims })
    .setProtectedHeader({ alg: by.alg, kid: by.kid, ...header })
    .sign(by.privateKey);
}

const BODY = { name: 'from the idp', level: 2, expiresIn: 60 };

async function create(jwt: string) {
  return k.req('POST', '/apikeys/jwt', { headers: { authorization: `Bearer ${jwt}` }, body: BODY });
}

/** The tokenRefusal of the last request line (LOG_LEVEL=debug). */
const lastRefusal = () => k.logLines('request').at(-1)?.tokenRefusal;

describe('JWT_JWKS_URL', () => {
  it.each(['rsa', 'ec', 'ed'] as const)(
    'accepts a %s-signed token, on /jwt, verify and forward-auth',
    async (name) => {
      const by = { rsa, ec, ed }[name];
      const jwt = await token(by, { level: 5 });
      const created = await create(jwt);
      expect(created.status).toBe(201);
      expect(created.json.apikey).toMatchObject({ userId: 42, level: 2 });
      const verified = await k.req('POST', '/apikeys/verify', { body: { token: jwt } });
      expect(verified.json).toMatchObject({
        valid: true,
        code: 'VALID',
        principal: { type: 'jwt', userId: 42, level: 5 },
      });
      const forward = await k.req('GET', '/forward-auth', { headers: { authorization: `Bearer ${jwt}` } });
      expect(forward.status).toBe(200);
      expect(provider.requests).toBe(1);
    },
  );

  it('refuses an unknown kid, and asks the provider again only after 30 s', async () => {
    const stranger = await signer('nobody-knows', 'RS256');
    expect((await create(await token(rsa))).status).toBe(201);
    expect(provider.requests).toBe(1);

    expect((await create(await token(stranger))).status).toBe(403);
    expect(lastRefusal()).toBe('unknown-kid');
    k.time.now += 29_999;
    expect((await create(await token(stranger))).status).toBe(403);
    expect(provider.requests).toBe(1); // still cooling down: no fetch
    k.time.now += 1;
    expect((await create(await token(stranger))).status).toBe(403);
    expect(provider.requests).toBe(2); // one refetch, and the kid is still unknown
    expect(lastRefusal()).toBe('unknown-kid');
  });

  it('accepts a key the provider added, once the cooldown allows a refetch', async () => {
    expect((await create(await token(rsa))).status).toBe(201);
    provider.published = [rotated.jwk, rsa.jwk, ec.jwk];
    expect((await create(await token(rotated))).status).toBe(403);
    k.time.now += 30_000;
    expect((await create(await token(rotated))).status).toBe(201);
    expect(provider.requests).toBe(2);
    // The old key, still published, keeps working; a withdrawn one stops at the next refresh.
    provider.published = [rotated.jwk];
    expect((await create(await token(ec))).status).toBe(201);
    k.time.now += 600_000;
    expect((await create(await token(rotated))).status).toBe(201); // refreshed first
    expect(provider.requests).toBe(3);
    expect((await create(await token(ec))).status).toBe(403);
    expect(lastRefusal()).toBe('unknown-kid');
  });

  it('stops a remembered token once the refresh finds its key withdrawn', async () => {
    const jwt = await token(ec, { exp: nowS() + 3600 });
    const verify = async () => (await k.req('POST', '/apikeys/verify', { body: { token: jwt } })).json.code;
    expect(await verify()).toBe('VALID');
    provider.published = [rsa.jwk];
    k.time.now += 599_999;
    expect(await verify()).toBe('VALID'); // remembered, and the keys are not due yet
    expect(provider.requests).toBe(1);
    k.time.now += 1;
    expect(await verify()).toBe('INVALID_TOKEN');
    expect(lastRefusal()).toBe('unknown-kid');
    expect(provider.requests).toBe(2);
  });

  it('keeps remembered tokens valid through a refresh that fails, and one that changes nothing', async () => {
    const jwt = await token(ec, { exp: nowS() + 7200 });
    const verify = async () => (await k.req('POST', '/apikeys/verify', { body: { token: jwt } })).json.code;
    expect(await verify()).toBe('VALID');
    k.time.now += 600_000;
    expect(await verify()).toBe('VALID');
    expect(provider.requests).toBe(2);
    provider.down = true;
    k.time.now += 600_000;
    expect(await verify()).toBe('VALID');
    expect(await verify()).toBe('VALID');
    expect(provider.requests).toBe(3);
  });

  it('keeps accepting from its cache while the provider is down, through refresh and refetch attempts', async () => {
    expect((await create(await token(rsa))).status).toBe(201);
    provider.down = true;
    k.time.now += 3_600_000; // far past the 10-minute refresh
    expect((await create(await token(ec))).status).toBe(201);
    expect(provider.requests).toBe(2); // the refresh was tried, failed, and the cache answered
    expect((await create(await token(ed))).status).toBe(201);
    k.time.now += 30_000;
    expect((await create(await token(await signer('new', 'RS256')))).status).toBe(403);
    expect(provider.requests).toBe(3);
    expect((await create(await token(rsa, { sub: '43' }))).status).toBe(201);
  });

  it('refuses while no key was ever fetched, and recovers after the cooldown', async () => {
    provider.down = true;
    expect((await create(await token(rsa))).status).toBe(403);
    expect(lastRefusal()).toBe('jwks-unavailable');
    provider.down = false;
    expect((await create(await token(rsa))).status).toBe(403);
    expect(provider.requests).toBe(1);
    k.time.now += 30_000;
    expect((await create(await token(rsa))).status).toBe(201);
  });

  it('refuses algorithm confusion: HS256 signed with the public key bytes', async () => {
    for (const secret of [rsa.pem, JSON.stringify(rsa.jwk), rsa.jwk.n as string]) {
      const header = Buffer.from(JSON.stringify({ alg: 'HS256', kid: rsa.kid })).toString('base64url');
      const payload = Buffer.from(JSON.stringify({ sub: '42', exp: nowS() + 300 })).toString('base64url');
      const signature = createHmac('sha256', secret).update(`${header}.${payload}`).digest('base64url');
      const forged = `${header}.${payload}.${signature}`;
      expect((await create(forged)).status).toBe(403);
      expect(lastRefusal()).toBe('algorithm-not-allowed');
      expect((await k.req('POST', '/apikeys/verify', { body: { token: forged } })).json.code).toBe(
        'INVALID_TOKEN',
      );
    }
  });

  it('refuses alg none, and an algorithm outside JWT_ALGORITHMS even from a published key', async () => {
    const header = Buffer.from(JSON.stringify({ alg: 'none' })).toString('base64url');
    const payload = Buffer.from(JSON.stringify({ sub: '42', exp: nowS() + 300 })).toString('base64url');
    expect((await create(`${header}.${payload}.`)).status).toBe(403);
    expect(lastRefusal()).toBe('algorithm-not-allowed');
    expect((await create(await token(ec384))).status).toBe(403);
    expect(lastRefusal()).toBe('algorithm-not-allowed');
  });

  it('refuses a token signed by another key under a published kid', async () => {
    const impostor = await signer(rsa.kid, 'RS256');
    expect((await create(await token(impostor))).status).toBe(403);
    expect(lastRefusal()).toBe('bad-signature');
  });

  it('honours JWT_CLOCK_TOLERANCE_SECONDS on exp, nbf and iat', async () => {
    const tolerant = await testKeygate({ JWT_JWKS_URL: provider.url, JWT_CLOCK_TOLERANCE_SECONDS: '30' });
    try {
      const at = (claims: Record<string, unknown>) =>
        token(rsa, claims).then((jwt) =>
          tolerant.req('POST', '/apikeys/jwt', { headers: { authorization: `Bearer ${jwt}` }, body: BODY }),
        );
      expect((await at({ exp: nowS() - 29 })).status).toBe(201);
      expect((await at({ exp: nowS() - 30 })).status).toBe(403);
      expect((await at({ nbf: nowS() + 30 })).status).toBe(201);
      expect((await at({ nbf: nowS() + 31 })).status).toBe(403);
      expect((await at({ iat: nowS() + 30 })).status).toBe(201);
      expect((await at({ iat: nowS() + 31 })).status).toBe(403);
    } finally {
      await tolerant.close();
    }
  });

  it('says nothing about the refusal at the info level, and never logs the token', async () => {
    const quiet = await testKeygate({ JWT_JWKS_URL: provider.url });
    try {
      const jwt = await token(rsa, { exp: nowS() - 1 });
      await quiet.req('POST', '/apikeys/jwt', { headers: { authorization: `Bearer ${jwt}` }, body: BODY });
      expect(quiet.logLines('request').at(-1)).not.toHaveProperty('tokenRefusal');
      await create(jwt);
      expect(lastRefusal()).toBe('expired');
      const everything = JSON.stringify(k.logLines());
      expect(everything).not.toContain(jwt.split('.')[2] as string);
      expect(everything).not.toContain(jwt.split('.')[1] as string);
    } finally {
      await quiet.close();
    }
  });
});

describe('createJwksKeySet', () => {
  it('gives up on an endpoint that does not answer within its timeout', async () => {
    let release = () => {};
    const hung = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      fetch: () => new Promise<Response>((resolve) => (release = () => resolve(new Response('late')))),
    });
    try {
      const keySet = createJwksKeySet({
        url: `http://127.0.0.1:${hung.port}/`,
        clock: () => START,
        timeoutMs: 50,
      });
      const attempt = keySet({ alg: 'RS256', kid: 'x' }, { payload: '', signature: '' } as never);
      await expect(attempt).rejects.toBeInstanceOf(JwksUnavailable);
      expect(keySet.fetches).toBe(1);
    } finally {
      release();
      hung.stop(true);
    }
  });

  it.each([
    ['not 200', () => new Response('{"keys":[]}', { status: 500 })],
    ['not JSON', () => new Response('<html>')],
    ['not a key set', () => Response.json({ keys: 'none' })],
    ['a redirect', () => Response.redirect('http://127.0.0.1:1/', 302)],
  ])('treats an answer that is %s as unavailable', async (_, answer) => {
    const odd = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: answer });
    try {
      const keySet = createJwksKeySet({ url: `http://127.0.0.1:${odd.port}/`, clock: () => START });
      await expect(
        keySet({ alg: 'RS256', kid: 'x' }, { payload: '', signature: '' } as never),
      ).rejects.toBeInstanceOf(JwksUnavailable);
    } finally {
      odd.stop(true);
    }
  });
});
