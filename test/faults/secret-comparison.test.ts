// Secret comparison cannot leak how much of a secret was right: it hashes the candidate and
// compares whole digests with crypto.timingSafeEqual, never with an early-exit comparison, and does
// the same work for an unknown key as for a known one. Proven by structure (spies), not by timing.
import { afterEach, describe, expect, it, spyOn } from 'bun:test';
import * as crypto from 'node:crypto';
import { generateSecret, hashSecret, secretMatches } from '../../src/apikeys/secrets';
import { createApiKeyService } from '../../src/apikeys/service';
import type { ApiKeyStore } from '../../src/apikeys/store';

const spies: Array<{ mockRestore(): void }> = [];
afterEach(() => {
  for (const spy of spies.splice(0)) spy.mockRestore();
});

function watch() {
  const timingSafeEqual = spyOn(crypto, 'timingSafeEqual');
  const equals = spyOn(Buffer.prototype, 'equals');
  const compare = spyOn(Buffer, 'compare');
  spies.push(timingSafeEqual, equals, compare);
  return { timingSafeEqual, earlyExit: () => equals.mock.calls.length + compare.mock.calls.length };
}

describe('secretMatches', () => {
  const secret = generateSecret();
  const stored = hashSecret(secret);
  /** The stored digest with one byte changed at `at`: the first difference anywhere from 0 to 31. */
  const differingAt = (at: number) => {
    const copy = Buffer.from(stored);
    copy[at] = (copy[at] as number) ^ 0xff;
    return copy;
  };

  it.each([0, 1, 15, 30, 31])('compares all 32 bytes when the first difference is at byte %i', (at) => {
    const { timingSafeEqual, earlyExit } = watch();
    expect(secretMatches(secret, differingAt(at))).toBe(false);
    expect(timingSafeEqual).toHaveBeenCalledTimes(1);
    const [candidate, expected] = timingSafeEqual.mock.calls[0] as unknown as [Uint8Array, Uint8Array];
    expect([candidate.length, expected.length]).toEqual([32, 32]);
    expect(earlyExit()).toBe(0);
  });

  it('compares digests, not the secrets: a one-character secret and a 10,000-character one cost one 32-byte compare', () => {
    const { timingSafeEqual, earlyExit } = watch();
    for (const candidate of ['x', secret.slice(0, -1), `${secret}x`, 'y'.repeat(10_000), secret]) {
      secretMatches(candidate, stored);
    }
    expect(timingSafeEqual.mock.calls.map((call) => (call[0] as Uint8Array).length)).toEqual([
      32, 32, 32, 32, 32,
    ]);
    expect(earlyExit()).toBe(0);
  });

  it('still matches the exact secret', () => {
    const { timingSafeEqual } = watch();
    expect(secretMatches(secret, stored)).toBe(true);
    expect(timingSafeEqual).toHaveBeenCalledTimes(1);
  });
});

describe('authenticateKey', () => {
  const secret = generateSecret();
  const row = {
    id: 'kg_0123456789ABCDEFGHIJab',
    secretHash: hashSecret(secret),
    userId: 1,
    level: 3,
    name: 'k',
    createdAt: 0,
    expiresAt: Number.MAX_SAFE_INTEGER,
  };
  const findKey = async (id: string) => (id === row.id ? row : undefined);
  const store = { findKey } as unknown as ApiKeyStore;
  const service = createApiKeyService({ store, keys: { find: findKey }, clock: () => 1, maxKeysPerUser: 10 });

  it('does one full-digest compare for an unknown key, a wrong secret and the right one alike', async () => {
    const { timingSafeEqual, earlyExit } = watch();
    expect(await service.authenticateKey('kg_zzzzzzzzzzzzzzzzzzzzzz', secret)).toEqual({
      status: 'not-found',
    });
    // A wrong secret with a valid checksum (a bad checksum is refused earlier, before any lookup): the
    // same status; the existing key's id rides along for its usage counts only (never an answer).
    expect(await service.authenticateKey(row.id, generateSecret())).toEqual({
      status: 'not-found',
      keyId: row.id,
    });
    expect(await service.authenticateKey(row.id, secret)).toEqual({
      status: 'valid',
      row,
      at: expect.any(Number),
    });
    expect(timingSafeEqual).toHaveBeenCalledTimes(3);
    for (const [a, b] of timingSafeEqual.mock.calls as unknown as Array<[Uint8Array, Uint8Array]>) {
      expect([a.length, b.length]).toEqual([32, 32]);
    }
    expect(earlyExit()).toBe(0);
  });
});
