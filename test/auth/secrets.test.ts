// Key ids, secrets and hashes: format, randomness, hashing, comparison.
import { describe, expect, it } from 'bun:test';
import { createHash } from 'node:crypto';
import {
  generateKeyId,
  generateSecret,
  hashSecret,
  KEY_ID_PATTERN,
  secretMatches,
} from '../../src/auth/secrets';

describe('generateKeyId', () => {
  it('is kg_ and 22 base62 characters, and never repeats in 10,000 draws', () => {
    const ids = new Set(Array.from({ length: 10_000 }, generateKeyId));
    expect(ids.size).toBe(10_000);
    for (const id of ids) expect(id).toMatch(/^kg_[A-Za-z0-9]{22}$/);
  });

  it('uses the whole alphabet in every position but the first (no bias toward a few characters)', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 2000; i++) seen.add(generateKeyId().charAt(10));
    expect(seen.size).toBe(62);
  });
});

describe('generateSecret', () => {
  it('is 43 URL-safe characters carrying 256 bits', () => {
    const secret = generateSecret();
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(secret, 'base64url')).toHaveLength(32);
    expect(generateSecret()).not.toBe(secret);
  });
});

describe('hashing', () => {
  it('stores SHA-256 of the secret', () => {
    expect(hashSecret('abc')).toEqual(createHash('sha256').update('abc').digest());
  });

  it('matches only the exact secret', () => {
    const secret = generateSecret();
    const stored = hashSecret(secret);
    expect(secretMatches(secret, stored)).toBe(true);
    expect(secretMatches(`${secret}x`, stored)).toBe(false);
    expect(secretMatches(secret.slice(0, -1), stored)).toBe(false);
    expect(secretMatches('', stored)).toBe(false);
    expect(secretMatches(secret, new Uint8Array(0))).toBe(false);
  });
});

describe('KEY_ID_PATTERN', () => {
  it.each([
    ['kg_0000000000000000000000', true],
    ['kg_000000000000000000000', false],
    ['kg_000000000000000000000-', false],
    ['KG_0000000000000000000000', false],
    [' kg_0000000000000000000000', false],
  ])('%s → %p', (id, valid) => {
    expect(KEY_ID_PATTERN.test(id)).toBe(valid);
  });
});
