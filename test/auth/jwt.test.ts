// JWT verification rules, unit by unit: pinned algorithm, required exp and sub, time claims, level.
import { describe, expect, it } from 'bun:test';
import { SignJWT } from 'jose';
import { createJwtAuthority } from '../../src/auth/jwt';
import { parseUserId } from '../../src/auth/token-users';

const SECRET = 'unit-test-secret-that-is-32-bytes-or-more';
const key = new TextEncoder().encode(SECRET);
const now = Date.parse('2026-01-01T00:00:00Z');
const nowS = now / 1000;
const authority = createJwtAuthority({ secret: SECRET, clock: () => now });

const sign = (claims: Record<string, unknown>, alg = 'HS256') =>
  new SignJWT(claims).setProtectedHeader({ alg }).sign(key);

describe('verify', () => {
  it('returns the subject and level 8 when there is no level claim', async () => {
    expect(await authority.verify(await sign({ sub: '42', exp: nowS + 1 }))).toEqual({
      ok: true,
      identity: {
        subject: '42',
        subjectIsText: true,
        issuer: '',
        level: 8,
        expiresAt: now + 1000,
        scopes: [],
      },
    });
  });

  it('returns the level claim when present', async () => {
    expect(await authority.verify(await sign({ sub: 42, exp: nowS + 1, level: 0 }))).toEqual({
      ok: true,
      identity: {
        subject: '42',
        subjectIsText: false,
        issuer: '',
        level: 0,
        expiresAt: now + 1000,
        scopes: [],
      },
    });
  });

  it.each([
    ['HS384', { sub: '1', exp: nowS + 60 }, 'HS384'],
    ['missing exp', { sub: '1' }, 'HS256'],
    ['exp in the past', { sub: '1', exp: nowS - 1 }, 'HS256'],
    ['nbf in the future', { sub: '1', exp: nowS + 60, nbf: nowS + 1 }, 'HS256'],
    ['missing sub', { exp: nowS + 60 }, 'HS256'],
    ['sub as an object', { sub: { id: 1 }, exp: nowS + 60 }, 'HS256'],
    ['level 8.5', { sub: '1', exp: nowS + 60, level: 8.5 }, 'HS256'],
  ])('rejects %s', async (_, claims, alg) => {
    expect(await authority.verify(await sign(claims, alg))).toMatchObject({ ok: false });
  });

  it('rejects garbage without throwing', async () => {
    for (const token of ['', 'a.b.c', '....', 'eyJ.eyJ.x', 'é.é.é'])
      expect(await authority.verify(token)).toMatchObject({ ok: false });
  });

  it('verifies what it signs, with iss and aud when configured', async () => {
    const strict = createJwtAuthority({ secret: SECRET, issuer: 'i', audience: 'a', clock: () => now });
    const token = await strict.sign({ sub: 5, level: 2, ttlSeconds: 60 });
    expect(await strict.verify(token)).toMatchObject({
      ok: true,
      identity: { subject: '5', issuer: 'i', level: 2 },
    });
    expect(await authority.verify(token)).toMatchObject({ ok: true, identity: { subject: '5', level: 2 } });
    expect(
      await createJwtAuthority({ secret: SECRET, issuer: 'other', clock: () => now }).verify(token),
    ).toMatchObject({ ok: false });
  });

  it('honours the injected clock for exp', async () => {
    const token = await authority.sign({ sub: 1, ttlSeconds: 60 });
    const later = createJwtAuthority({ secret: SECRET, clock: () => now + 60_000 });
    expect(await later.verify(token)).toMatchObject({ ok: false });
  });
});

describe('the subject as text', () => {
  it.each([
    ['auth0|5f1b2c', 'auth0|5f1b2c'],
    ['007', '007'],
    [0, '0'],
    [42, '42'],
    [Number.MAX_SAFE_INTEGER, String(Number.MAX_SAFE_INTEGER)],
  ])('gives sub %p as %p', async (sub, subject) => {
    expect(await authority.verify(await sign({ sub, exp: nowS + 1 }))).toMatchObject({
      ok: true,
      identity: { subject },
    });
  });

  it.each([[-1], [1.5], [2 ** 53], [null], [true], [[1]]])('refuses sub %p (claims)', async (sub) => {
    expect(await authority.verify(await sign({ sub, exp: nowS + 1 }))).toEqual({
      ok: false,
      reason: 'claims',
    });
  });

  it('gives iss as the issuer, and refuses an iss that is not a string', async () => {
    expect(
      await authority.verify(await sign({ sub: 'a', iss: 'https://idp/', exp: nowS + 1 })),
    ).toMatchObject({
      identity: { issuer: 'https://idp/' },
    });
    expect(await authority.verify(await sign({ sub: 'a', iss: 7, exp: nowS + 1 }))).toEqual({
      ok: false,
      reason: 'claims',
    });
  });
});

describe('parseUserId (JWT_USER_IDS=numeric)', () => {
  it.each([
    ['0', 0],
    ['42', 42],
    ['007', 7],
    [String(Number.MAX_SAFE_INTEGER), Number.MAX_SAFE_INTEGER],
  ])('accepts %p', (sub, expected) => {
    expect(parseUserId(sub)).toBe(expected);
  });

  it.each([
    ['-1'],
    ['1.5'],
    [' 1'],
    ['1e3'],
    [''],
    ['abc'],
    ['auth0|1'],
    ['99999999999999999'],
    ['9007199254740992'],
  ])('rejects %p', (sub) => {
    expect(parseUserId(sub)).toBeNull();
  });
});
