// Secrets in the scanner-friendly format over HTTP: a bad checksum is refused without asking the
// store, and secrets issued in the earlier format keep authenticating.
import { afterEach, beforeEach, describe, expect, it, spyOn } from 'bun:test';
import { randomBytes } from 'node:crypto';
import { generateKeyId, generateSecret, hashSecret } from '../../src/apikeys/secrets';
import { START, type TestKeygate, testKeygate } from '../support/keygate';

let k: TestKeygate;
beforeEach(async () => {
  k = await testKeygate();
});
afterEach(() => k.close());

const BODY = { name: 'child', level: 1, expiresIn: 60 };

/** The same secret with its last checksum character changed. */
const withBadChecksum = (secret: string) => `${secret.slice(0, -1)}${secret.endsWith('0') ? '1' : '0'}`;

describe('a kgs_ secret with a wrong checksum', () => {
  it('is 403 on /key and NOT_FOUND on verify, and neither asks the key cache nor the store', async () => {
    const { key, secret } = await k.createKey(42);
    const cacheFind = spyOn(k.keygate.keys, 'find');
    const storeFind = spyOn(k.keygate.store, 'findKey');
    const bad = withBadChecksum(secret);

    const create = await k.req('POST', '/apikeys/key', { headers: k.basic(key, bad), body: BODY });
    expect(create.status).toBe(403);
    expect(create.json).toEqual({ result: 'error', error: expect.any(String) });
    const verify = await k.req('POST', '/apikeys/verify', { body: { key, secret: bad } });
    expect(verify.json).toEqual({ result: 'success', valid: false, code: 'NOT_FOUND' });
    const forward = await k.req('GET', '/forward-auth', {
      headers: { 'x-api-key': key, 'x-api-secret': bad },
    });
    expect(forward.status).toBe(403);
    expect(cacheFind).not.toHaveBeenCalled();
    expect(storeFind).not.toHaveBeenCalled();

    // The spies do see the lookup of a well-formed secret, so their silence above means something.
    const good = await k.req('POST', '/apikeys/key', { headers: k.basic(key, secret), body: BODY });
    expect(good.status).toBe(201);
    expect(cacheFind).toHaveBeenCalledTimes(1);
  });
});

describe('a secret issued before the kgs_ format', () => {
  it('still authenticates, on /key, verify and forward-auth; a wrong one still fails', async () => {
    const key = generateKeyId(Date.now());
    const old = randomBytes(32).toString('base64url');
    expect(old).not.toStartWith('kgs_');
    await k.keygate.store.insertKeyWithinLimit(
      {
        id: key,
        secretHash: hashSecret(old),
        userId: 42,
        level: 5,
        name: 'from before',
        createdAt: START - 86_400_000,
        expiresAt: START + 86_400_000,
      },
      1000,
    );

    const create = await k.req('POST', '/apikeys/key', { headers: k.basic(key, old), body: BODY });
    expect(create.status).toBe(201);
    expect(create.json.apikey.userId).toBe(42);
    expect(create.json.apikey.secret).toMatch(/^kgs_[0-9A-Za-z]{49}$/);
    const verify = await k.req('POST', '/apikeys/verify', { body: { key, secret: old } });
    expect(verify.json).toMatchObject({ valid: true, code: 'VALID', principal: { key, level: 5 } });
    const forward = await k.req('GET', '/forward-auth', { headers: k.basic(key, old) });
    expect(forward.status).toBe(200);

    const wrongSecret = `${old.slice(0, -1)}${old.endsWith('A') ? 'B' : 'A'}`;
    const wrong = await k.req('POST', '/apikeys/verify', { body: { key, secret: wrongSecret } });
    expect(wrong.json).toEqual({ result: 'success', valid: false, code: 'NOT_FOUND' });
  });
});

describe('SECRET_PREFIX=acme_', () => {
  it('starts new secrets with acme_; its wrong checksum asks nothing; a kgs_ secret from before still works', async () => {
    const local = await testKeygate({ SECRET_PREFIX: 'acme_' });
    try {
      const { key, secret } = await local.createKey(42);
      expect(secret).toMatch(/^acme_[0-9A-Za-z]{49}$/);
      const ok = await local.req('POST', '/apikeys/verify', { body: { key, secret } });
      expect(ok.json.code).toBe('VALID');

      const storeFind = spyOn(local.keygate.store, 'findKey');
      const bad = await local.req('POST', '/apikeys/verify', {
        body: { key, secret: withBadChecksum(secret) },
      });
      expect(bad.json).toEqual({ result: 'success', valid: false, code: 'NOT_FOUND' });
      expect(storeFind).not.toHaveBeenCalled();

      // A key issued under the default prefix before the setting changed.
      const before = generateKeyId(START);
      const kgs = generateSecret();
      await local.keygate.store.insertKeyWithinLimit(
        {
          id: before,
          secretHash: hashSecret(kgs),
          userId: 42,
          level: 1,
          name: 'kgs',
          createdAt: START,
          expiresAt: START + 3_600_000,
        },
        1000,
      );
      const old = await local.req('POST', '/apikeys/verify', { body: { key: before, secret: kgs } });
      expect(old.json.code).toBe('VALID');
      storeFind.mockClear();
      const oldBad = await local.req('POST', '/apikeys/verify', {
        body: { key: before, secret: withBadChecksum(kgs) },
      });
      expect(oldBad.json.code).toBe('NOT_FOUND');
      expect(storeFind).not.toHaveBeenCalled();
    } finally {
      await local.close();
    }
  });
});
