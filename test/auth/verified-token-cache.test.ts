// The verified-token cache never lets a token past its own time claims, and caches only successes.
import { describe, expect, it } from 'bun:test';
import { SignJWT } from 'jose';
import { createJwtAuthority } from '../../src/auth/jwt';

const SECRET = 'unit-test-secret-that-is-32-bytes-or-more';
const start = Date.parse('2026-01-01T00:00:00Z');
const startS = start / 1000;

function movableAuthority() {
  let now = start;
  const authority = createJwtAuthority({ secret: SECRET, clock: () => now });
  return { authority, setNow: (ms: number) => (now = ms) };
}

const sign = (claims: Record<string, unknown>) =>
  new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).sign(new TextEncoder().encode(SECRET));

describe('verified-token cache', () => {
  it('rejects a remembered token once its exp is reached', async () => {
    const { authority, setNow } = movableAuthority();
    const token = await sign({ sub: 7, exp: startS + 60 });
    expect(await authority.verify(token)).toEqual({
      ok: true,
      identity: {
        subjectIsText: false,
        subject: '7',
        issuer: '',
        level: 8,
        expiresAt: start + 60_000,
        scopes: [],
      },
    });
    setNow(start + 59_999);
    expect(await authority.verify(token)).toEqual({
      ok: true,
      identity: {
        subjectIsText: false,
        subject: '7',
        issuer: '',
        level: 8,
        expiresAt: start + 60_000,
        scopes: [],
      },
    });
    setNow(start + 60_000);
    expect(await authority.verify(token)).toMatchObject({ ok: false });
    setNow(start);
    // Forgotten, and checked in full again: still valid at the earlier time.
    expect(await authority.verify(token)).toEqual({
      ok: true,
      identity: {
        subjectIsText: false,
        subject: '7',
        issuer: '',
        level: 8,
        expiresAt: start + 60_000,
        scopes: [],
      },
    });
  });

  it('rejects a remembered token before its nbf when the clock moves back', async () => {
    const { authority, setNow } = movableAuthority();
    const token = await sign({ sub: 7, exp: startS + 60, nbf: startS });
    expect(await authority.verify(token)).toMatchObject({ ok: true });
    setNow(start - 1000);
    expect(await authority.verify(token)).toMatchObject({ ok: false });
  });

  it('does not let a tampered copy of a remembered token through', async () => {
    const { authority } = movableAuthority();
    const token = await sign({ sub: 7, exp: startS + 60 });
    expect(await authority.verify(token)).toMatchObject({ ok: true });
    const tampered = `${token.slice(0, -2)}${token.endsWith('AA') ? 'BB' : 'AA'}`;
    expect(await authority.verify(tampered)).toMatchObject({ ok: false });
    expect(await authority.verify(tampered)).toMatchObject({ ok: false });
  });
});
