// Key ids, secrets and hashes: format, randomness, hashing, comparison.
import { describe, expect, it } from 'bun:test';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  checksumOf,
  generateKeyId,
  generateSecret,
  hashSecret,
  isWellFormedSecret,
  KEY_ID_PATTERN,
  SECRET_PATTERN,
  secretMatches,
  secretPattern,
} from '../../src/apikeys/secrets';

describe('generateKeyId', () => {
  const NOW = Date.parse('2026-11-23T12:00:00.000Z');

  it('is kg_, 8 base62 digits of the time and 22 random base62 characters; never repeats in the same millisecond', () => {
    const ids = new Set(Array.from({ length: 10_000 }, () => generateKeyId(NOW)));
    expect(ids.size).toBe(10_000);
    for (const id of ids) {
      expect(id).toMatch(/^kg_[A-Za-z0-9]{30}$/);
      expect(id).toMatch(KEY_ID_PATTERN);
    }
  });

  it('writes the creation time in base62, most significant digit first', () => {
    expect(generateKeyId(0).slice(0, 11)).toBe('kg_00000000');
    expect(generateKeyId(61).slice(0, 11)).toBe('kg_0000000z');
    expect(generateKeyId(62).slice(0, 11)).toBe('kg_00000010');
    expect(generateKeyId(62 ** 8 - 1).slice(0, 11)).toBe('kg_zzzzzzzz');
  });

  it('sorts the ids of later keys after earlier ones, byte by byte (as the primary-key index does)', () => {
    const times = [0, 1, 61, 62, NOW - 1, NOW, NOW + 1, NOW + 86_400_000, 62 ** 8 - 1];
    const ids = times.map((time) => generateKeyId(time));
    const byBytes = [...ids].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    expect(byBytes).toEqual(ids);
  });

  it('uses the whole alphabet in every random position (no bias toward a few characters)', () => {
    for (const position of [11, 20, 32]) {
      const seen = new Set<string>();
      for (let i = 0; i < 2000; i++) seen.add(generateKeyId(NOW).charAt(position));
      expect(seen.size).toBe(62);
    }
  });
});

describe('generateSecret', () => {
  it('is kgs_, 43 base62 characters and their 6-character checksum, and never repeats', () => {
    const secrets = new Set(Array.from({ length: 10_000 }, generateSecret));
    expect(secrets.size).toBe(10_000);
    for (const secret of secrets) {
      expect(secret).toMatch(/^kgs_[0-9A-Za-z]{49}$/);
      expect(secret.slice(-6)).toBe(checksumOf(secret.slice(4, 47)));
      expect(isWellFormedSecret(secret)).toBe(true);
    }
  });

  it('draws the body from the whole alphabet', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 2000; i++) seen.add(generateSecret().charAt(30));
    expect(seen.size).toBe(62);
  });
});

describe('checksumOf', () => {
  it('is the CRC32 in base62, zero-padded to 6', () => {
    // CRC32("123456789") = 0xCBF43926 (the standard check value) = 3421780262 in base 10.
    expect(checksumOf('123456789')).toBe('3jZRME');
    // CRC32("") = 0
    expect(checksumOf('')).toBe('000000');
  });
});

describe('isWellFormedSecret', () => {
  const good = generateSecret();
  const body = good.slice(4, 47);
  const otherDigit = (c: string) => (c === '0' ? '1' : '0');
  it.each([
    ['a wrong last checksum character', `${good.slice(0, -1)}${otherDigit(good.slice(-1))}`],
    [
      'a wrong first checksum character',
      `${good.slice(0, -6)}${otherDigit(good.slice(-6, -5))}${good.slice(-5)}`,
    ],
    ['the checksum of another body', `kgs_${body}${checksumOf(`${body.slice(1)}x`)}`],
    ['a changed body character', `kgs_${otherDigit(body[0] as string)}${body.slice(1)}${good.slice(-6)}`],
    ['one character short', good.slice(0, -1)],
    ['one character long', `${good}0`],
    ['a character outside base62', `kgs_${body.slice(0, -1)}-${good.slice(-6)}`],
    ['the prefix alone', 'kgs_'],
  ])('refuses a kgs_ secret with %s', (_, secret) => {
    expect(isWellFormedSecret(secret)).toBe(false);
  });

  it('accepts every secret keygate makes', () => {
    for (let i = 0; i < 1000; i++) expect(isWellFormedSecret(generateSecret())).toBe(true);
  });

  it('lets secrets of the earlier format, and anything without the prefix, through to the store', () => {
    expect(isWellFormedSecret(randomBytes(32).toString('base64url'))).toBe(true);
    expect(isWellFormedSecret('KGS_not-ours')).toBe(true);
  });
});

describe('SECRET_PREFIX', () => {
  const otherDigit = (c: string) => (c === '0' ? '1' : '0');
  it('starts every new secret, with the same body and checksum after it', () => {
    for (let i = 0; i < 1000; i++) {
      const secret = generateSecret('acme_');
      expect(secret).toMatch(secretPattern('acme_'));
      expect(secret.slice(-6)).toBe(checksumOf(secret.slice(5, 48)));
      expect(isWellFormedSecret(secret, 'acme_')).toBe(true);
    }
  });

  it.each([
    ['the configured prefix', 'acme_'],
    ['kgs_', 'kgs_'],
    ['an earlier prefix, neither of them', 'old_prod_'],
    ['the longest prefix', '0123456789abcde_'],
    ['the shortest prefix', 'a_'],
  ])('refuses a wrong checksum after %s, and passes a right one', (_, prefix) => {
    const good = generateSecret(prefix);
    expect(isWellFormedSecret(good, 'acme_')).toBe(true);
    expect(isWellFormedSecret(`${good.slice(0, -1)}${otherDigit(good.slice(-1))}`, 'acme_')).toBe(false);
  });

  it('refuses a damaged secret of the configured prefix or kgs_ (short, long, outside base62)', () => {
    for (const prefix of ['acme_', 'kgs_']) {
      const good = generateSecret(prefix);
      expect(isWellFormedSecret(good.slice(0, -1), 'acme_')).toBe(false);
      expect(isWellFormedSecret(`${good}0`, 'acme_')).toBe(false);
      expect(isWellFormedSecret(`${good.slice(0, 20)}-${good.slice(21)}`, 'acme_')).toBe(false);
    }
  });

  it('never refuses a secret of the earlier format, even one that starts with the prefix', () => {
    for (let i = 0; i < 1000; i++) {
      const old = randomBytes(32).toString('base64url');
      expect(isWellFormedSecret(old, 'a_')).toBe(true);
      expect(isWellFormedSecret(`a_${old.slice(2)}`, 'a_')).toBe(true);
      expect(isWellFormedSecret(`kgs_${old.slice(4)}`, 'a_')).toBe(true);
    }
  });
});

describe('the scanner rule in docs/security.md', () => {
  const doc = readFileSync(new URL('../../docs/security.md', import.meta.url), 'utf8');
  const rule = /regex = '''(.+)'''/.exec(doc)?.[1];
  const scanner = new RegExp(rule ?? 'no rule in docs/security.md', 'g');

  it('finds every generated secret, inside text too, and SECRET_PATTERN agrees', () => {
    expect(rule).toBeDefined();
    for (let i = 0; i < 1000; i++) {
      const secret = generateSecret();
      expect(SECRET_PATTERN.test(secret)).toBe(true);
      expect(`export KEYGATE_SECRET="${secret}"`.match(scanner)).toEqual([secret]);
    }
  });

  it('finds no key id and no secret of the earlier format', () => {
    for (let i = 0; i < 1000; i++) {
      const text = `key=${generateKeyId(Date.now())} old=${randomBytes(32).toString('base64url')}`;
      expect(text.match(scanner)).toBeNull();
    }
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
