// Tokens checked against one PEM public key (JWT_PUBLIC_KEY): the algorithms its key type fits,
// algorithm confusion refused, and a token signed by any other key refused.
import { afterEach, beforeAll, describe, expect, it } from 'bun:test';
import { createHmac } from 'node:crypto';
import { exportPKCS8, exportSPKI, generateKeyPair, importPKCS8, SignJWT } from 'jose';
import { type TestKeygate, testKeygate } from '../support/keygate';

// Private keys as PKCS#8, imported for each algorithm a test signs with (a CryptoKey has one).
let signing = '';
let otherSigning = '';
let pem = '';
beforeAll(async () => {
  const rsa = await generateKeyPair('RS256', { extractable: true });
  signing = await exportPKCS8(rsa.privateKey);
  otherSigning = await exportPKCS8((await generateKeyPair('RS256', { extractable: true })).privateKey);
  pem = await exportSPKI(rsa.publicKey);
});

let k: TestKeygate;
afterEach(() => k?.close());

const BODY = { name: 'pem', level: 1, expiresIn: 60 };
const nowS = () => Math.floor(k.time.now / 1000);
const sign = async (alg: string, pkcs8: string) =>
  new SignJWT({ sub: '9', exp: nowS() + 60 }).setProtectedHeader({ alg }).sign(await importPKCS8(pkcs8, alg));
const create = (token: string) =>
  k.req('POST', '/apikeys/jwt', { headers: { authorization: `Bearer ${token}` }, body: BODY });
const lastRefusal = () => k.logLines('request').at(-1)?.tokenRefusal;

describe('JWT_PUBLIC_KEY', () => {
  it('accepts RS256 by default, and PS256 or RS512 only when JWT_ALGORITHMS names them', async () => {
    k = await testKeygate({ JWT_PUBLIC_KEY: pem, LOG_LEVEL: 'debug' });
    expect((await create(await sign('RS256', signing))).status).toBe(201);
    expect((await create(await sign('PS256', signing))).status).toBe(403);
    expect(lastRefusal()).toBe('algorithm-not-allowed');
    await k.close();
    k = await testKeygate({ JWT_PUBLIC_KEY: pem, JWT_ALGORITHMS: 'PS256,RS512' });
    expect((await create(await sign('PS256', signing))).status).toBe(201);
    expect((await create(await sign('RS512', signing))).status).toBe(201);
    expect((await create(await sign('RS256', signing))).status).toBe(403);
  });

  it('refuses a token signed by another key, and HS256 signed with the PEM text', async () => {
    k = await testKeygate({ JWT_PUBLIC_KEY: pem, LOG_LEVEL: 'debug' });
    expect((await create(await sign('RS256', otherSigning))).status).toBe(403);
    expect(lastRefusal()).toBe('bad-signature');
    for (const secret of [pem, pem.trim()]) {
      const header = Buffer.from('{"alg":"HS256","typ":"JWT"}').toString('base64url');
      const payload = Buffer.from(JSON.stringify({ sub: 9, exp: nowS() + 60 })).toString('base64url');
      const mac = createHmac('sha256', secret).update(`${header}.${payload}`).digest('base64url');
      expect((await create(`${header}.${payload}.${mac}`)).status).toBe(403);
      expect(lastRefusal()).toBe('algorithm-not-allowed');
    }
  });

  it('keeps `keygate token`-style signing unavailable inside the server', async () => {
    k = await testKeygate({ JWT_PUBLIC_KEY: pem });
    await expect(k.keygate.jwt.sign({ sub: 1, ttlSeconds: 60 })).rejects.toThrow('HS256 secret');
  });
});
