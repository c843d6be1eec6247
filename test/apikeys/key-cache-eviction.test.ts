// The key cache inside keygate: every path that authenticates a key sees a delete, a rotation or a
// purge on the very next request; a change the store did not announce lasts at most KEY_CACHE_SECONDS.

import { afterEach, beforeEach, describe, expect, it } from 'bun:test';
import { purgeExpiredKeys } from '../../src/jobs/purge';
import { type TestKeygate, testKeygate } from '../support/keygate';
import { rawQuery } from '../support/raw-query';

let k: TestKeygate;
beforeEach(async () => {
  k = await testKeygate({ KEY_CACHE_SECONDS: '30' });
});
afterEach(() => k.close());

const verifyCode = async (key: string, secret: string) =>
  (await k.req('POST', '/apikeys/verify', { body: { key, secret } })).json.code;
const keySchemeStatus = async (key: string, secret: string) =>
  (await k.req('GET', '/apikeys/key', { headers: k.basic(key, secret) })).status;
const forwardAuthStatus = async (key: string, secret: string) =>
  (await k.req('GET', '/forward-auth', { headers: k.basic(key, secret) })).status;

describe('key cache eviction', () => {
  it('a deleted key is refused at once by the key scheme, verify and forward-auth', async () => {
    const key = await k.createKey(1);
    expect(await keySchemeStatus(key.key, key.secret)).toBe(200);
    expect(await verifyCode(key.key, key.secret)).toBe('VALID');
    expect(await forwardAuthStatus(key.key, key.secret)).toBe(200);
    expect(k.keygate.keys.size().keys).toBe(1);
    expect((await k.req('DELETE', `/apikeys/${key.key}/jwt`, { headers: await k.bearer(1) })).status).toBe(
      204,
    );
    expect(await keySchemeStatus(key.key, key.secret)).toBe(403);
    expect(await verifyCode(key.key, key.secret)).toBe('NOT_FOUND');
    expect(await forwardAuthStatus(key.key, key.secret)).toBe(403);
  });

  it('a key that deletes itself is refused by its next request', async () => {
    const key = await k.createKey(1);
    const headers = k.basic(key.key, key.secret);
    expect((await k.req('DELETE', `/apikeys/${key.key}/key`, { headers })).status).toBe(204);
    expect(await keySchemeStatus(key.key, key.secret)).toBe(403);
  });

  it('a key rotated out is refused at once everywhere', async () => {
    const key = await k.createKey(1);
    expect(await forwardAuthStatus(key.key, key.secret)).toBe(200);
    const rotated = await k.req('POST', `/apikeys/${key.key}/rotate/key`, {
      headers: k.basic(key.key, key.secret),
    });
    expect(rotated.status).toBe(201);
    expect(await keySchemeStatus(key.key, key.secret)).toBe(403);
    expect(await forwardAuthStatus(key.key, key.secret)).toBe(403);
    expect(await verifyCode(key.key, key.secret)).toBe('EXPIRED');
  });

  it('the purge evicts what it removes', async () => {
    const key = await k.createKey(1, { expiresIn: 5 });
    expect(await verifyCode(key.key, key.secret)).toBe('VALID');
    k.time.now += 5000;
    expect(await verifyCode(key.key, key.secret)).toBe('EXPIRED');
    expect(await purgeExpiredKeys(k.keygate.store, () => k.time.now)).toBe(1);
    expect(await verifyCode(key.key, key.secret)).toBe('NOT_FOUND');
  });

  it('an unknown key becomes known when a key with that id is inserted', async () => {
    // Ids are random, so this only happens if someone guessed one; the negative entry must not outlive the insert.
    const key = await k.createKey(1);
    await k.keygate.store.deleteKey(key.key);
    expect(await verifyCode(key.key, key.secret)).toBe('NOT_FOUND');
    expect(k.keygate.keys.size().unknown).toBe(1);
    const row = {
      id: key.key,
      secretHash: new Uint8Array(32),
      userId: 1,
      level: 1,
      name: 'x',
      createdAt: 0,
      expiresAt: 1e15,
    };
    await k.keygate.store.insertKeyWithinLimit(row, 10);
    expect(k.keygate.keys.size().unknown).toBe(0);
  });

  it('a change the store never announced lasts at most KEY_CACHE_SECONDS', async () => {
    const key = await k.createKey(1, { level: 2 });
    expect(
      (await k.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret } })).json.principal
        .level,
    ).toBe(2);
    // Another process changes the row behind this one's back (as a replica would without NOTIFY).
    await rawQuery(k.keygate, 'UPDATE api_keys SET level = 5 WHERE id = $1', [key.key]);
    const level = async () =>
      (await k.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret } })).json.principal
        .level;
    k.time.now += 29_999;
    expect(await level()).toBe(2);
    k.time.now += 1;
    expect(await level()).toBe(5);
  });
});
