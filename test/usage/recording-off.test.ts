// The bench measures what usage recording costs a verification against a build that records none
// (bench/keygate-entry.ts, BENCH_USAGE_RECORDING=off). That build must still answer every verification
// alike, and record nothing: no last use, no history, on a verify nor on a /key authentication.
import { describe, expect, it } from 'bun:test';
import { testKeygate } from '../support/keygate';

async function usedOnce(recordUsage: boolean) {
  const k = await testKeygate({}, { recordUsage });
  const key = await k.createKey(42);
  const verified = await k.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret } });
  await k.req('GET', '/apikeys/key', { headers: k.basic(key.key, key.secret) });
  await k.usageTick();
  const info = await k.req('GET', `/apikeys/${key.key}/jwt`, { headers: await k.bearer(42) });
  const usage = await k.req('GET', `/apikeys/${key.key}/usage/jwt`, { headers: await k.bearer(42) });
  await k.keygate.close();
  return { code: verified.json.code, lastUsedAt: info.json.apikey.lastUsedAt, usage: usage.json.usage };
}

describe('usage recording switched off (the bench build only)', () => {
  it('answers alike and records no last use and no history', async () => {
    const off = await usedOnce(false);
    expect(off).toEqual({ code: 'VALID', lastUsedAt: null, usage: [] });
  });

  it('records both when on, as keygate always runs', async () => {
    const on = await usedOnce(true);
    expect(on.code).toBe('VALID');
    expect(on.lastUsedAt).not.toBeNull();
    expect(on.usage.map((bucket: { valid: number }) => bucket.valid)).toEqual([1]);
  });
});
